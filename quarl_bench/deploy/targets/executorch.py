"""ExecuTorch: a ``.pte`` file lowered to XNNPACK, on ExecuTorch's runtime (``deploy/edge.py``); ``executorch-int8``
is calibrated on the W8A8 fake-quant policy's calibration states."""

from __future__ import annotations

from typing import Any

from quarl_bench.backend_registry import Backend, register_backend

EXECUTORCH = ("executorch",)


def build(name: str, module: Any, sample: Any, _calibration: Any, _method: str, network_states: Any) -> Any:
    from quarl_bench.deploy.backends import edge_artifact

    return edge_artifact(name, module, sample, network_states)


register_backend(Backend("executorch-fp32", "fp32", "pte", "edge", EXECUTORCH, f"{__name__}:build", torch_only=True))
register_backend(
    Backend(
        "executorch-int8",
        "int8",
        "pte",
        "edge",
        (*EXECUTORCH, "torchao"),
        f"{__name__}:build",
        w8a8_states=True,
        torch_only=True,
    )
)
