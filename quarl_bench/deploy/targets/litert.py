"""LiteRT: a ``.tflite`` file on the LiteRT interpreter (``deploy/edge.py``); ``litert-int8`` is full-integer,
calibrated on the W8A8 fake-quant policy's calibration states."""

from __future__ import annotations

from quarl_bench.registry import Backend, register_backend

LITERT = ("litert_torch", "ai_edge_litert")


register_backend(
    Backend("litert-fp32", "fp32", "tflite", "edge", LITERT, "quarl_bench.deploy.backends:build_edge", torch_only=True)
)
register_backend(
    Backend(
        "litert-int8",
        "int8",
        "tflite",
        "edge",
        (*LITERT, "torchao"),
        "quarl_bench.deploy.backends:build_edge",
        w8a8_states=True,
        torch_only=True,
        fp32_observation=True,
    )
)
