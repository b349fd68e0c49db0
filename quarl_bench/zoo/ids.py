"""Names of where agents come from, importable without torch: the Control Suite's env prefix (the forms an agent is
stored in, and what each does, are :mod:`quarl_bench.zoo.forms`)."""

from __future__ import annotations

DMC_PREFIX = "dmc/"  # the Control Suite's tasks as flat-observation gymnasium envs (zoo/dmc.py)
