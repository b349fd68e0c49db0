"""``c-int8`` and ``c-int4``: ``policy.h`` + ``policy.c``, dependency-free C99 for MLP policies
(``deploy/c_int8.py``), compiled by the system C compiler (checked when the backend is asked for) and called
through ``ctypes``; calibrated on the W8A8 fake-quant policy's calibration states. ``c-int4`` packs the weights two
per byte (per-output-channel int4 codes in [-7, 7]) with int8 activations and int32 accumulators, as CMSIS-NN's s4
kernels: the deploy path of agents hardened for int4."""

from __future__ import annotations

from typing import Any

from quarl_bench.deploy.targets import ArtifactKind, Backend, register_backend, register_kind
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

CLIENT = """\
import ctypes
import subprocess

flags = contract["c"]["required_flags"].split()  # -std=c99 -ffp-contract=off: the bit-exactness claim needs them
subprocess.run(["cc", *flags, "-O2", "-shared", "-fPIC", "policy.c", "-o", "libpolicy.so"], check=True)
library = ctypes.CDLL("./libpolicy.so")
policy_act = getattr(library, contract["c"]["function"])
floats = ctypes.POINTER(ctypes.c_float)
action = np.zeros(max(1, contract["action"]["dim"]), dtype=np.float32)


def act(obs):
    x = np.ascontiguousarray(obs, dtype=np.float32)
    index = policy_act(x.ctypes.data_as(floats), action.ctypes.data_as(floats))
    if index < 0:
        raise ValueError(f"non-finite observation {obs}: the policy wrote no action")
    return index if contract["action"]["space"] == "Discrete" else action.copy()
"""
PROBE = """\
import ctypes
library = ctypes.CDLL(path)
action = (ctypes.c_float * 64)()
row = np.ascontiguousarray(obs[0], dtype=np.float32)
run = lambda x: library.quarl_policy_act(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), action)
"""


def compiled_library(artifact: Any, folder: Any) -> Any:
    """What the memory probe loads: the artifact's C compiled to a host library by ctypes' side."""
    from quarl_bench.deploy.c_build import host_library

    return host_library(dict(artifact.files), folder)


register_kind(
    ArtifactKind(
        "c",
        "policy.c",
        "quarl_bench.deploy.backends:c_runner",
        "a C compiler",
        client=CLIENT,
        probe=PROBE,
        probe_file=f"{__name__}:compiled_library",
    )
)
