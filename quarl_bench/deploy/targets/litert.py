"""LiteRT: a ``.tflite`` file on the LiteRT interpreter (``deploy/edge.py``); ``litert-int8`` is full-integer,
calibrated on the W8A8 fake-quant policy's calibration states."""

from __future__ import annotations

from quarl_bench.deploy.targets import ArtifactKind, Backend, register_backend, register_kind

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

CLIENT = """\
from ai_edge_litert.interpreter import Interpreter

interpreter = Interpreter(model_path="policy.tflite", num_threads=1)
interpreter.allocate_tensors()
source, target = interpreter.get_input_details()[0], interpreter.get_output_details()[0]


def act(obs):
    x = np.asarray(obs, dtype=np.float32)[None]
    scale, zero = source["quantization"]
    if scale:  # a full-integer model takes int8: quantize with the input tensor's own scale and zero point
        x = np.clip(np.round(x / scale) + zero, -128, 127)
    interpreter.set_tensor(source["index"], x.astype(source["dtype"]))
    interpreter.invoke()
    y = interpreter.get_tensor(target["index"])
    scale, zero = target["quantization"]
    if scale and y.dtype == np.int8:
        y = (y.astype(np.float32) - zero) * scale
    return y[0]
"""
PROBE = """\
from ai_edge_litert.interpreter import Interpreter
interpreter = Interpreter(model_path=path, num_threads=1)
interpreter.allocate_tensors()
source = interpreter.get_input_details()[0]
data = np.zeros(source["shape"], source["dtype"])
def run(x):
    interpreter.set_tensor(source["index"], data)
    interpreter.invoke()
"""
register_kind(
    ArtifactKind(
        "tflite",
        "policy.tflite",
        "quarl_bench.deploy.backends:edge_runner",
        "ai-edge-litert",
        ("ai-edge-litert",),
        CLIENT,
        probe=PROBE,
        checked=True,
        recipe="PT2E static int8: per-channel symmetric weights, per-tensor activations (min-max ranges)",
    )
)
