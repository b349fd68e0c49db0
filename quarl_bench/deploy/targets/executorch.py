"""ExecuTorch: a ``.pte`` file lowered to XNNPACK, on ExecuTorch's runtime (``deploy/edge.py``); ``executorch-int8``
is calibrated on the W8A8 fake-quant policy's calibration states."""

from __future__ import annotations

from quarl_bench.deploy.targets import ArtifactKind, Backend, register_backend, register_kind

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

CLIENT = """\
import torch
from executorch.runtime import Runtime

method = Runtime.get().load_program("policy.pte").load_method("forward")


def act(obs):
    return method.execute([torch.as_tensor(np.asarray(obs, dtype=np.float32)[None])])[0].numpy()[0]
"""
PROBE = """\
import torch
from executorch.runtime import Runtime
method = Runtime.get().load_program(path).load_method("forward")
run = lambda x: method.execute([torch.as_tensor(x)])
"""
register_kind(
    ArtifactKind(
        "pte",
        "policy.pte",
        "quarl_bench.deploy.backends:edge_runner",
        "executorch",
        ("executorch",),
        CLIENT,
        probe=PROBE,
        checked=True,
        recipe="XNNPACK PT2E int8: per-channel symmetric weights, per-tensor activations (min-max ranges)",
    )
)
