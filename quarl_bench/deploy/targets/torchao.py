"""``torchao-int8``: torchao's ``Int8DynamicActivationInt8WeightConfig`` on the policy's Linear layers. Its tensor
subclasses neither trace nor pickle as a whole module, so the artifact is the quantized state dict (bytes counted)
and the module runs in-process."""

from __future__ import annotations

from typing import Any

from quarl_bench.deploy.targets import Backend, register_backend


def build(_name: str, module: Any, *_: Any) -> Any:
    import copy
    import io

    import torch

    from quarl_bench.deploy.backends import Artifact
    from quarl_bench.errors import QuarlError

    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError as error:
        raise QuarlError(f"backend torchao-int8 unavailable: {error}") from error
    quantized = copy.deepcopy(module).eval()
    with torch.no_grad():
        quantize_(quantized, Int8DynamicActivationInt8WeightConfig())
    buffer = io.BytesIO()
    torch.save(quantized.state_dict(), buffer)
    return Artifact("torchao-int8", "torch", buffer.getvalue(), quantized)


register_backend(
    Backend(
        "torchao-int8",
        "int8",
        "torch",
        "deploy",
        ("torchao",),
        f"{__name__}:build",
        {"precision": "int8", "granularity": "per-channel", "symmetric": True},  # activations dynamic
        torch_only=True,
    )
)
