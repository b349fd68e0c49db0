"""The student a recipe trains: the agent's own policy with its acting layers computing at the target spec (fake
quantization with the straight-through estimator, or grid-step weight noise), and what it outputs per policy kind.
"""

from __future__ import annotations

import numpy as np
import torch
from stable_baselines3.common.policies import BasePolicy
from torch import nn

from quarl_bench.families import Output, family_of
from quarl_bench.quant.layers import acting_layers, acting_lstms
from quarl_bench.quant.qat import QATSwitch, prepare_qat, release_qat
from quarl_bench.types import QuantSpec


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
        layer.__dict__["qat_input_range"] = (bounds.low, bounds.high)


def decision_output(policy: BasePolicy, observations: torch.Tensor) -> Output:
    """The differentiable output the policy's deterministic action comes from (its family's)."""
    return family_of(policy).decision(policy, observations)


def value_spread(values: np.ndarray) -> float:
    """The median over states of (best - worst action value): the scale a Q-network's margin is measured in."""
    return float(np.median(values.max(axis=1) - values.min(axis=1))) if values.shape[1] > 1 else 0.0
