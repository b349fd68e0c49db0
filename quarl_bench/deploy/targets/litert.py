"""LiteRT: a ``.tflite`` file on the LiteRT interpreter (``deploy/edge.py``); ``litert-int8`` is full-integer,
calibrated on the W8A8 fake-quant policy's calibration states."""

from __future__ import annotations

from typing import Any

from quarl_bench.backend_registry import Backend, register_backend

LITERT = ("litert_torch", "ai_edge_litert")


def build(name: str, module: Any, sample: Any, _calibration: Any, _method: str, network_states: Any) -> Any:
    from quarl_bench.deploy.backends import edge_artifact

    return edge_artifact(name, module, sample, network_states)


register_backend(Backend("litert-fp32", "fp32", "tflite", "edge", LITERT, f"{__name__}:build", torch_only=True))
register_backend(
    Backend(
        "litert-int8",
        "int8",
        "tflite",
        "edge",
        (*LITERT, "torchao"),
        f"{__name__}:build",
        w8a8_states=True,
        torch_only=True,
    )
)
