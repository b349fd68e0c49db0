"""``torch-fp32``: the policy traced to TorchScript, the reference every other backend is timed and gated against
(for an ONNX policy, the user's own fp32 graph)."""

from __future__ import annotations

from typing import Any

from quarl_bench.registry import Backend, register_backend


def build_torchscript(_name: str, module: Any, sample: Any, *_: Any) -> Any:
    import io

    import torch

    from quarl_bench.deploy.backends import Artifact
    from quarl_bench.deploy.export import GraphPolicy, RecurrentDeployablePolicy

    if isinstance(module, GraphPolicy):
        return Artifact("torch-fp32", "onnx", module.graph)
    example = module.example(sample) if isinstance(module, RecurrentDeployablePolicy) else (torch.as_tensor(sample),)
    with torch.no_grad():
        traced = torch.jit.trace(module.eval(), example)
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer)
    return Artifact("torch-fp32", "torchscript", buffer.getvalue())


register_backend(
    Backend("torch-fp32", "fp32", "torchscript", "deploy", (), f"{__name__}:build_torchscript", carries_state=True)
)
