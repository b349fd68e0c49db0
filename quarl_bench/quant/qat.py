"""Quantization-aware training: the acting layers compute with fake-quantized weights once a quant delay passes.

The same ``quantize_tensor`` as post-training quantization is used in the forward pass; its straight-through
estimator lets gradients reach the fp32 weights. Layers are converted in place (their class is swapped for a
subclass with a quantizing ``forward``), so parameter names, order and state dicts stay exactly SB3's: target
networks, polyak updates, saving and loading are unaffected.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import BasePolicy
from torch import nn
from torch.nn import functional

from quarl_bench.quant.affine import activation_grid, fake_quant
from quarl_bench.quant.layers import acting_lstms
from quarl_bench.quant.quantize import acting_layers, grid_noise, quantize_tensor
from quarl_bench.types import QuantSpec


@dataclass
class QATSwitch:
    """Shared by every converted layer: off until the quant delay, then on for the rest of training.

    :param weight_noise: instead of rounding, add uniform noise this many grid steps wide
        (``quant.quantize.grid_noise``; 0: round).
    :param input_bits: also fake-quantize each layer's input at this integer width, per tensor (0: no): on the
        layer's ``qat_input_range`` (low, high) where one was calibrated, else on the batch's own range.
    """

    spec: QuantSpec
    quantize_activations: bool = False
    enabled: bool = False
    enabled_at_step: int | None = None
    weight_noise: float = 0.0
    input_bits: int = 0


class _QATMixin:
    qat_switch: QATSwitch

    def _qat_weight(self, weight: torch.Tensor, is_conv: bool, gates: int = 1) -> torch.Tensor:
        switch = self.qat_switch
        if not switch.enabled:
            return weight
        if switch.weight_noise:
            return weight + switch.weight_noise * grid_noise(weight.detach(), switch.spec, is_conv)
        return quantize_tensor(weight, switch.spec, is_conv, gates)

    def _qat_input(self, x: torch.Tensor) -> torch.Tensor:
        switch = self.qat_switch
        if not (switch.enabled and switch.input_bits):
            return x
        bounds = getattr(self, "qat_input_range", None)  # calibrated as PTQ's activation quantizers are
        if bounds is None:
            return fake_quant(x, switch.input_bits)
        return x + (activation_grid(x.detach(), bounds[0], bounds[1], switch.input_bits) - x).detach()

    def _qat_output(self, output: torch.Tensor) -> torch.Tensor:
        switch = self.qat_switch
        if switch.enabled and switch.quantize_activations and switch.spec.number_format.is_int:
            return fake_quant(output, switch.spec.bits)
        return output


class QATLinear(_QATMixin, nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self._qat_weight(self.weight, False)
        return self._qat_output(functional.linear(self._qat_input(x), weight, self.bias))


class QATConv2d(_QATMixin, nn.Conv2d):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self._qat_weight(self.weight, True)
        return self._qat_output(self._conv_forward(self._qat_input(x), weight, self.bias))


class QATLSTM(_QATMixin, nn.LSTM):
    """A (sequence-first) LSTM whose gate weights compute on the target grid, per gate (``quant.layers``): the
    cell written out step by step, as the fused kernel cannot take substituted weights."""

    def forward(self, input, hx=None):  # noqa: A002  (nn.LSTM's own signature)
        steps, batch = input.shape[0], input.shape[1]
        if hx is None:
            zeros = input.new_zeros(self.num_layers, batch, self.hidden_size)
            hx = (zeros, zeros)
        h, c = list(hx[0].unbind(0)), list(hx[1].unbind(0))
        weights = [
            (
                self._qat_weight(getattr(self, f"weight_ih_l{layer}"), False, 4),
                self._qat_weight(getattr(self, f"weight_hh_l{layer}"), False, 4),
                getattr(self, f"bias_ih_l{layer}") + getattr(self, f"bias_hh_l{layer}") if self.bias else 0.0,
            )
            for layer in range(self.num_layers)
        ]
        outputs = []
        for step in range(steps):
            x = input[step]
            for layer, (w_ih, w_hh, bias) in enumerate(weights):
                gates = functional.linear(x, w_ih) + functional.linear(h[layer], w_hh) + bias
                i, f, g, o = gates.chunk(4, dim=1)
                c[layer] = torch.sigmoid(f) * c[layer] + torch.sigmoid(i) * torch.tanh(g)
                h[layer] = torch.sigmoid(o) * torch.tanh(c[layer])
                x = h[layer]
            outputs.append(x)
        return torch.stack(outputs), (torch.stack(h), torch.stack(c))


_QAT_CLASSES = {nn.Linear: QATLinear, nn.Conv2d: QATConv2d, nn.LSTM: QATLSTM}
_PLAIN_CLASSES = {QATLinear: nn.Linear, QATConv2d: nn.Conv2d, QATLSTM: nn.LSTM}


def prepare_qat(policy: BasePolicy, switch: QATSwitch) -> list[str]:
    """Convert the policy's acting Linear/Conv2d layers (and a recurrent actor's LSTM) in place; returns their
    names."""
    converted = []
    for name, module in [*acting_lstms(policy), *acting_layers(policy)]:
        qat_class = _QAT_CLASSES.get(type(module))
        if qat_class is None:
            continue
        module.__class__ = qat_class
        module.qat_switch = switch
        converted.append(name)
    return converted


def release_qat(policy: nn.Module) -> None:
    """Turn converted layers back into plain Linear/Conv2d (their weights, the fp32 latent ones, unchanged)."""
    for module in policy.modules():
        plain = _PLAIN_CLASSES.get(type(module))
        if plain is not None:
            module.__class__ = plain
            del module.qat_switch
            module.__dict__.pop("qat_input_range", None)


class QuantDelayCallback(BaseCallback):
    """Switch fake quantization on once ``quant_delay`` environment steps have been collected."""

    def __init__(self, switch: QATSwitch, quant_delay: int) -> None:
        super().__init__()
        self.switch = switch
        self.quant_delay = quant_delay

    def _on_step(self) -> bool:
        if not self.switch.enabled and self.num_timesteps >= self.quant_delay:
            self.switch.enabled = True
            self.switch.enabled_at_step = self.num_timesteps
        return True
