"""``torch-fp32``: the policy traced to TorchScript, the reference every other backend is timed and gated against
(for an ONNX policy, the user's own fp32 graph)."""

from __future__ import annotations

from typing import Any

from quarl_bench.deploy.targets import ArtifactKind, Backend, register_backend, register_kind


def build_torchscript(_name: str, module: Any, sample: Any, *_: Any) -> Any:
    import io

    import torch

    from quarl_bench.deploy.backends import Artifact

    if not module.torch_layers:  # an ONNX policy played as its own graph: its fp32 reference is that graph
        return Artifact("torch-fp32", "onnx", module.onnx(sample))
    with torch.no_grad():
        traced = torch.jit.trace(module.eval(), module.example(sample))
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer)
    return Artifact("torch-fp32", "torchscript", buffer.getvalue())


register_backend(
    Backend("torch-fp32", "fp32", "torchscript", "deploy", (), f"{__name__}:build_torchscript", carries_state=True)
)

CLIENT = """\
import torch

policy = torch.jit.load("policy.ts.pt")


def act(obs):
    return policy(torch.as_tensor(np.asarray(obs, dtype=np.float32)[None]))[0].numpy()
"""
RECURRENT_CLIENT = """\
import torch

policy = torch.jit.load("policy.ts.pt")
layers, hidden = contract["state"]["layers"], contract["state"]["hidden"]
state = [torch.zeros(layers, 1, hidden) for _ in range(2)]  # (h, c): zero at an episode start


def act(obs):
    action, state[0], state[1] = policy(torch.as_tensor(np.asarray(obs, dtype=np.float32)[None]), *state)
    return action[0].numpy()
"""
PROBE = """\
import torch
torch.set_num_threads(1)
module = torch.jit.load(path).eval()
run = lambda x: module(torch.as_tensor(x))
"""
RUNNER = "quarl_bench.deploy.backends:torch_runner"
register_kind(ArtifactKind("torchscript", "policy.ts.pt", RUNNER, "torch", (), CLIENT, RECURRENT_CLIENT, PROBE))
register_kind(ArtifactKind("torch", "policy.pt", RUNNER))  # a state dict, run in quarl-bench's process
