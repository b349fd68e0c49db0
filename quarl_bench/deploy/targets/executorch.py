"""ExecuTorch: a ``.pte`` file lowered to XNNPACK, on ExecuTorch's runtime (``deploy/edge.py``); ``executorch-int8``
is calibrated on the W8A8 fake-quant policy's calibration states."""

from __future__ import annotations

from quarl_bench.registry import Backend, register_backend

EXECUTORCH = ("executorch",)


register_backend(
    Backend(
        "executorch-fp32", "fp32", "pte", "edge", EXECUTORCH, "quarl_bench.deploy.backends:build_edge", torch_only=True
    )
)
register_backend(
    Backend(
        "executorch-int8",
        "int8",
        "pte",
        "edge",
        (*EXECUTORCH, "torchao"),
        "quarl_bench.deploy.backends:build_edge",
        w8a8_states=True,
        torch_only=True,
    )
)
