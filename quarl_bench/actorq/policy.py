"""The actors' Q-network at a given precision, built from the learner's fp32 weights."""

from __future__ import annotations

import warnings

import torch
from torch import nn

ACTOR_PRECISIONS = ("fp32", "fp16", "int8")


def q_network(obs_dim: int, n_actions: int, arch: list[int]) -> nn.Sequential:
    """SB3's DQN ``q_net.q_net`` layout: Linear+ReLU per hidden layer, then a Linear head (same state-dict keys)."""
    layers: list[nn.Module] = []
    width = obs_dim
    for hidden in arch:
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    layers.append(nn.Linear(width, n_actions))
    return nn.Sequential(*layers)


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


def greedy_actions(policy: nn.Module, observations: torch.Tensor, precision: str) -> torch.Tensor:
    with torch.inference_mode():
        inputs = observations.half() if precision == "fp16" else observations.float()
        return policy(inputs).argmax(dim=1)


def holds_int8_weights(policy: nn.Module) -> bool:
    """True when every Linear of the policy is a dynamically quantized one with qint8 weights."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    linears = [m for m in policy.modules() if isinstance(m, nn.Linear | DynamicLinear)]
    return bool(linears) and all(isinstance(m, DynamicLinear) and m.weight().dtype == torch.qint8 for m in linears)
