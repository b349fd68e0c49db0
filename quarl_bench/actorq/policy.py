"""The actors' acting network at a given precision, built from the learner's fp32 weights, and how it acts."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from quarl_bench.actorq.config import ACTOR_INT8_RUNTIMES, ACTOR_PRECISIONS  # noqa: F401  (re-exported)


def acting_network(obs_dim: int, out_dim: int, arch: list[int], squash: bool) -> nn.Sequential:
    """SB3's acting MLP: DQN's ``q_net.q_net`` (``squash=False``) or TD3/DDPG's ``actor.mu`` (a Tanh at the end).

    Same layer order as SB3's ``create_mlp``, so the learner's state dict loads without renaming keys.
    """
    layers: list[nn.Module] = []
    width = obs_dim
    for hidden in arch:
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    layers.append(nn.Linear(width, out_dim))
    if squash:
        layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def network_for(action_space: spaces.Space, obs_dim: int, arch: list[int]) -> nn.Sequential:
    """The acting network for an env's action space: Q-values per discrete action, or a squashed continuous action."""
    if isinstance(action_space, spaces.Discrete):
        return acting_network(obs_dim, int(action_space.n), arch, squash=False)
    assert isinstance(action_space, spaces.Box)  # ActorQ's action spaces are Discrete or Box (config checks)
    return acting_network(obs_dim, int(np.prod(action_space.shape)), arch, squash=True)


def actor_policy(fp32: nn.Sequential, precision: str) -> nn.Module:
    """``fp32`` at the actors' precision: int8 is torch's dynamic quantization (int8 weights, real int8 GEMM
    kernels, activations quantized per batch); fp16 stores and computes in half precision."""
    if precision == "fp32":
        return fp32
    if precision == "fp16":
        return fp32.half()
    if precision == "int8":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated for torchao; same fbgemm kernels
            return torch.ao.quantization.quantize_dynamic(fp32, {nn.Linear}, dtype=torch.qint8)
    raise ValueError(f"bad actor precision {precision!r}: expected one of {', '.join(ACTOR_PRECISIONS)}")


def uses_onnxruntime(precision: str, int8_backend: str) -> bool:
    return precision == "int8" and int8_backend == "onnxruntime"


def build_policy(state: dict[str, torch.Tensor], net: nn.Sequential, precision: str, int8_backend: str) -> Any:
    """The actors' policy from fp32 weights: an ORT int8 graph, or ``net`` loaded and cast/quantized by torch."""
    if uses_onnxruntime(precision, int8_backend):
        return load_payload(*policy_payload(state, net, precision, int8_backend))
    net.load_state_dict(state)
    return actor_policy(net, precision)


def policy_payload(state: dict[str, torch.Tensor], net: nn.Sequential, precision: str, int8_backend: str):
    """``build_policy`` serialized for a broadcast: ("onnx", model bytes) or ("torch", pickled module)."""
    if uses_onnxruntime(precision, int8_backend):
        from quarl_bench.actorq.onnx_policy import int8_onnx_model

        return "onnx", int8_onnx_model(state, squash=isinstance(net[-1], nn.Tanh))
    return "torch", pickle.dumps(build_policy(state, net, precision, int8_backend))


def load_payload(kind: str, data: bytes) -> Any:
    if kind == "onnx":
        from quarl_bench.actorq.onnx_policy import OrtActorPolicy

        return OrtActorPolicy(data)
    return pickle.loads(data)


def network_output(policy: nn.Module, observation: np.ndarray, precision: str) -> np.ndarray:
    """The policy's output for one observation, in fp32 (Q-values, or an action in [-1, 1])."""
    return network_outputs(policy, np.asarray(observation)[None], precision)[0]


def network_outputs(policy: nn.Module, observations: np.ndarray, precision: str) -> np.ndarray:
    """The policy's outputs for a batch of observations, in fp32."""
    with torch.inference_mode():
        inputs = torch.as_tensor(observations)
        inputs = inputs.half() if precision == "fp16" else inputs.float()
        return policy(inputs).float().numpy()


def holds_int8_weights(policy: Any) -> bool:
    """True when every matrix product of the policy uses int8 weights (ORT MatMulInteger, or torch qint8 Linear)."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    if not isinstance(policy, nn.Module):
        return bool(getattr(policy, "int8", False))

    linears = [m for m in policy.modules() if isinstance(m, nn.Linear | DynamicLinear)]
    return bool(linears) and all(isinstance(m, DynamicLinear) and m.weight().dtype == torch.qint8 for m in linears)
