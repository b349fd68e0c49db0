"""Real low-precision deployment: the whole policy as one artifact (export.py), built per backend (backends.py),
played in the loop, timed and weighed (timing.py)."""
