"""What runs: grids and flags made into jobs (``grids.py``), the unit an executor runs (``work.py``), and where
Ray runs them (``ray_cluster.py``)."""
