"""ONNX Runtime backends on the policy's ONNX export: ``ort-fp32``; ``ort-fp16`` (onnxruntime's float16 converter, I/O
kept fp32/uint8); ``ort-int8-dynamic`` (``quantize_dynamic``: int8 weights, activations quantized at run time,
MatMul/Gemm only); ``ort-int8-static`` (``quantize_static`` in QDQ, weights per channel, activation ranges calibrated
on observations the fp32 agent visits; vector observations keep the first layer in fp32, see
``deploy/backends.py``)."""

from __future__ import annotations

from typing import Any

from quarl_bench.deploy.targets import ArtifactKind, Backend, register_backend, register_kind

ORT = ("onnx", "onnxruntime")


def _onnx(module: Any, sample: Any) -> bytes:
    from quarl_bench.deploy.export import to_onnx

    return to_onnx(module, sample)  # an ONNX policy: its own graph


def build_fp32(_name: str, module: Any, sample: Any, *_: Any) -> Any:
    from quarl_bench.deploy.backends import Artifact

    return Artifact("ort-fp32", "onnx", _onnx(module, sample))


def build_fp16(_name: str, module: Any, sample: Any, *_: Any) -> Any:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    from quarl_bench.deploy.backends import Artifact

    model = convert_float_to_float16(onnx.load_from_string(_onnx(module, sample)), keep_io_types=True)
    return Artifact("ort-fp16", "onnx", model.SerializeToString())


def build_int8(name: str, module: Any, sample: Any, calibration: Any, calibration_method: str, *_: Any) -> Any:
    """``ort-int8-dynamic`` or ``ort-int8-static`` (which calibrates on ``calibration``)."""
    from quarl_bench.deploy.backends import Artifact
    from quarl_bench.deploy.ort_int8 import ort_int8

    return Artifact(name, "onnx", ort_int8(name, _onnx(module, sample), calibration, calibration_method))


register_backend(Backend("ort-fp32", "fp32", "onnx", "deploy", ORT, f"{__name__}:build_fp32", carries_state=True))
register_backend(
    Backend(
        "ort-fp16", "fp16", "onnx", "deploy", ORT, f"{__name__}:build_fp16", {"precision": "fp16"}, carries_state=True
    )
)
register_backend(
    Backend(
        "ort-int8-dynamic",
        "int8",
        "onnx",
        "deploy",
        ORT,
        f"{__name__}:build_int8",
        {"precision": "int8", "granularity": "per-tensor", "symmetric": True},  # activations dynamic
    )
)
register_backend(
    Backend(
        "ort-int8-static",
        "int8",
        "onnx",
        "deploy",
        ORT,
        f"{__name__}:build_int8",
        calibrated=True,
        fp32_observation=True,
    )
)

CLIENT = """\
import onnxruntime as ort

session = ort.InferenceSession("policy.onnx", providers=["CPUExecutionProvider"])


def act(obs):
    return session.run(None, {"obs": np.asarray(obs, dtype=np.float32)[None]})[0][0]
"""
RECURRENT_CLIENT = """\
import onnxruntime as ort

session = ort.InferenceSession("policy.onnx", providers=["CPUExecutionProvider"])
layers, hidden = contract["state"]["layers"], contract["state"]["hidden"]
state = [np.zeros((layers, 1, hidden), dtype=np.float32) for _ in range(2)]  # (h, c): zero at an episode start


def act(obs):
    action, state[0], state[1] = session.run(
        None, {"obs": np.asarray(obs, dtype=np.float32)[None], "h": state[0], "c": state[1]}
    )
    return action[0]
"""
PROBE = """\
import onnxruntime as ort
options = ort.SessionOptions(); options.intra_op_num_threads = 1
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
run = lambda x: session.run(None, {"obs": x})
"""
register_kind(
    ArtifactKind(
        "onnx",
        "policy.onnx",
        "quarl_bench.deploy.backends:onnx_runner",
        "onnxruntime",
        ("onnxruntime",),
        CLIENT,
        RECURRENT_CLIENT,
        PROBE,
        checked=True,
    )
)
