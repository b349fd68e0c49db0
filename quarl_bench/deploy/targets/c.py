"""``c-int8`` and ``c-int4``: ``policy.h`` + ``policy.c``, dependency-free C99 for MLP policies
(``deploy/c_int8.py``), compiled by the system C compiler (checked when the backend is asked for) and called
through ``ctypes``; calibrated on the W8A8 fake-quant policy's calibration states. ``c-int4`` packs the weights two
per byte (per-output-channel int4 codes in [-7, 7]) with int8 activations and int32 accumulators, as CMSIS-NN's s4
kernels: the deploy path of agents hardened for int4."""

from __future__ import annotations

from quarl_bench.registry import Backend, register_backend
from quarl_bench.types import DEFAULT_CALIBRATION_STATES

BUILD = "quarl_bench.deploy.backends:build_edge"
W4A8 = {
    "precision": "int4",
    "granularity": "per-channel",
    "symmetric": True,
    "act_bits": "int8",
    "calibration_states": DEFAULT_CALIBRATION_STATES,
    "calibration_method": "minmax",
}

register_backend(Backend("c-int8", "int8", "c", "deploy", (), BUILD, w8a8_states=True, torch_only=True))
register_backend(Backend("c-int4", "int4", "c", "deploy", (), BUILD, claims=W4A8, w8a8_states=True, torch_only=True))
