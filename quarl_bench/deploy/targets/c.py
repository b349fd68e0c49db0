"""``c-int8``: ``policy.h`` + ``policy.c``, dependency-free C99 for MLP policies (``deploy/c_int8.py``), compiled by
the system C compiler (checked when the backend is asked for) and called through ``ctypes``; calibrated on the W8A8
fake-quant policy's calibration states."""

from __future__ import annotations

from quarl_bench.backend_registry import Backend, register_backend

register_backend(
    Backend(
        "c-int8", "int8", "c", "deploy", (), "quarl_bench.deploy.backends:build_edge", w8a8_states=True, torch_only=True
    )
)
