"""``ort-fp32-folded``: the fp32 ONNX export after ONNX Runtime's basic graph optimizations (constant folding,
redundant node elimination), saved offline so a device loads the folded graph instead of folding at every start.
Basic optimizations only: ORT documents the extended ones as tied to the machine that ran them."""

from __future__ import annotations

from typing import Any

from quarl_bench.deploy.targets import Backend, register_backend


def build(name: str, module: Any, sample: Any, *_: Any) -> Any:
    """The folded graph of ``module`` traced on ``sample`` (an fp32 artifact of the ``onnx`` kind)."""
    import tempfile
    from pathlib import Path

    import onnxruntime as ort

    from quarl_bench.deploy.backends import Artifact
    from quarl_bench.deploy.export import to_onnx

    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(Path(folder) / "folded.onnx")
        ort.InferenceSession(to_onnx(module, sample), options, providers=["CPUExecutionProvider"])
        return Artifact(name, "onnx", Path(options.optimized_model_filepath).read_bytes())


register_backend(
    Backend(
        "ort-fp32-folded", "fp32", "onnx", "deploy", ("onnx", "onnxruntime"), f"{__name__}:build", carries_state=True
    )
)
