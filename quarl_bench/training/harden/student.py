"""The student a recipe trains: the agent's own policy with its acting layers computing at the target spec (fake
quantization with the straight-through estimator, or grid-step weight noise), and what it outputs per policy kind.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from torch import nn

from quarl_bench.quant.layers import acting_layers, acting_lstms, policy_family
from quarl_bench.quant.qat import QATSwitch, prepare_qat, release_qat
from quarl_bench.types import QuantSpec


@dataclass(frozen=True)
class Output:
    """What a policy's decision is made from: ``values`` (Q-values or mean quantiles: argmax), ``logits`` (a
    categorical distribution) or ``actions`` (continuous, scaled to [-1, 1])."""

    kind: str
    tensor: torch.Tensor


def target_switch(spec: QuantSpec, noise: float = 0.0) -> QATSwitch:
    """The switch that makes converted layers compute at ``spec``: its weight grid (or noise of ``noise`` grid steps
    instead of rounding), and its activation width on each layer's input where it has one."""
    input_bits = QuantSpec(spec.act_bits).bits if spec.act_bits and QuantSpec(spec.act_bits).number_format.is_int else 0
    return QATSwitch(spec, enabled=True, weight_noise=noise, input_bits=input_bits)


def acting_parameters(policy: nn.Module) -> list[nn.Parameter]:
    """The parameters of the acting layers (what the target spec quantizes, and what distillation trains): a
    recurrent actor's LSTM's too."""
    modules = [*acting_lstms(policy), *acting_layers(policy)]
    return [p for _, module in modules for p in module.parameters(recurse=False)]


def convert(policy: BasePolicy, switch: QATSwitch) -> list[str]:
    """Make the policy's acting layers compute per ``switch`` (in place; ``release`` undoes it)."""
    return prepare_qat(policy, switch)


release = release_qat


def calibrate_inputs(policy: BasePolicy, switch: QATSwitch, states: np.ndarray, method: str) -> None:
    """Give each converted layer the input range PTQ's activation quantizer would calibrate on ``states`` (the
    policy's inputs with its weights at the target grid, ``method`` as the spec says), so the student computes
    as the certified W/A spec will."""
    from quarl_bench.quant.activations import calibrate, record_tensors

    if not switch.input_bits:
        return
    layers = [module for _, module in acting_layers(policy)]
    for layer in layers:
        layer.__dict__.pop("qat_input_range", None)
    inputs = record_tensors(policy, states, layers, output=False)
    for layer, values in zip(layers, inputs, strict=True):
        bounds = calibrate(values, switch.spec.act_bits, method or "minmax", False)
        layer.qat_input_range = (bounds.low, bounds.high)


def decision_output(policy: BasePolicy, observations: torch.Tensor) -> Output:
    """The differentiable output the policy's deterministic action comes from."""
    family = policy_family(policy)
    discrete = isinstance(policy.action_space, spaces.Discrete)
    if family == "q":
        return Output("values", policy.q_net(observations))
    if family == "quantile":
        return Output("values", policy.quantile_net(observations).mean(dim=1))
    if family == "actor-critic":
        return distribution_output(policy, policy.get_distribution(observations))
    if family == "actor":
        actor = policy.actor
        actions = actor(observations, deterministic=True) if hasattr(actor, "action_dist") else actor(observations)
        return Output("actions", actions)
    if family == "ars":
        out = policy.action_net(policy.extract_features(observations, policy.features_extractor))
        return Output("logits" if discrete else "actions", out if discrete else _scaled(policy, out))
    out = policy.decision_values(observations)
    return Output("logits" if discrete else "actions", out if discrete else _scaled(policy, out))


def distribution_output(policy: BasePolicy, distribution) -> Output:
    """An actor-critic's decision output from its action distribution (a recurrent policy's too): the logits, or
    the deterministic action scaled to [-1, 1]."""
    if isinstance(policy.action_space, spaces.Discrete):
        return Output("logits", distribution.distribution.logits)
    return Output("actions", _scaled(policy, distribution.mode()))


def _scaled(policy: BasePolicy, actions: torch.Tensor) -> torch.Tensor:
    """Unsquashed Box actions clipped to the space, as the env receives them, then scaled to [-1, 1]."""
    space = policy.action_space
    if getattr(policy, "squash_output", False) or not isinstance(space, spaces.Box):
        return actions
    low = torch.as_tensor(space.low, dtype=actions.dtype)
    high = torch.as_tensor(space.high, dtype=actions.dtype)
    clipped = torch.maximum(torch.minimum(actions, high), low)
    return 2 * (clipped - low) / (high - low) - 1


def value_spread(values: np.ndarray) -> float:
    """The median over states of (best - worst action value): the scale a Q-network's margin is measured in."""
    return float(np.median(values.max(axis=1) - values.min(axis=1))) if values.shape[1] > 1 else 0.0
