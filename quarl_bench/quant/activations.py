"""Activation, observation and output quantization, simulated: forward hooks on the acting layers that round
their inputs (or the output layer's output) to a precision, with ranges calibrated on states the fp32 agent visits.

- ``act``: every acting layer's input, one range per tensor (the first layer's input is the observation, unless
  ``obs`` takes it).
- ``obs``: the first acting layer's input, the observation after normalisation, one range per feature (each sensor
  its own range, as an input ADC would have; images share one range); ``fp32`` keeps it out of ``act``.
- ``out``: the output layer's output: logits, Q-values or the action mean before squashing.

Integer widths use the asymmetric grid of :func:`quant.affine.activation_grid` over the calibrated range; fp8 is
scaled per tensor by the calibrated ``max |x|``; MX and NVFP4 scale per block at run time, as they are defined.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from quarl_bench.families import family_of
from quarl_bench.precision import precision as number_format
from quarl_bench.quant.affine import activation_grid
from quarl_bench.quant.layers import Layer, acting_layers, acting_lstms
from quarl_bench.types import QuantSpec

PERCENTILE = 99.99  # the percentile method's upper bound (its lower bound: 100 - PERCENTILE)
MSE_SHRINKS = np.linspace(1.0, 0.3, 15)  # fractions of the min-max range the mse method tries
OUTPUT_NAMES = ("action_net", "mu", "log_std")  # SB3's output layers by name; otherwise the last acting layer
CHUNK = 1024


@dataclass(frozen=True)
class Range:
    """A calibrated range: ``low``/``high`` of one tensor, or one value per feature (last dimension)."""

    low: torch.Tensor
    high: torch.Tensor


def output_layers(policy: nn.Module) -> list[Layer]:
    """The acting layers whose outputs leave the network: SB3's ``action_net``/``mu``/``log_std`` where they are
    layers, else the last acting layer."""
    layers = list(acting_layers(policy))
    named = [module for name, module in layers if name.rsplit(".", 1)[-1] in OUTPUT_NAMES]
    return named or [layers[-1][1]]


def run_policy(policy: nn.Module, states: np.ndarray) -> None:
    """Play the acting path on ``states`` (in chunks) for the hooks to see: ``predict`` runs exactly the layers the
    evaluation runs; a recurrent policy's are Markov states, each replayed from its own state."""
    family = family_of(policy)
    for start in range(0, len(states), CHUNK):
        family.play(policy, states[start : start + CHUNK])


def record_tensors(
    policy: nn.Module, states: np.ndarray, layers: Sequence[nn.Module], output: bool
) -> list[torch.Tensor]:
    """Each layer's inputs (or outputs) over ``states``, concatenated over chunks."""
    seen: list[list[torch.Tensor]] = [[] for _ in layers]

    def hook(index: int) -> Callable:
        def record(_module, inputs, outputs=None) -> None:
            tensor = outputs if output else inputs[0]
            if tensor.dim() == 3:  # an LSTM's sequence-first input: one row per step and env
                tensor = tensor.reshape(-1, tensor.shape[-1])
            seen[index].append(tensor.detach().float().cpu())

        return record

    handles = [
        layer.register_forward_hook(hook(i)) if output else layer.register_forward_pre_hook(hook(i))
        for i, layer in enumerate(layers)
    ]
    try:
        with torch.no_grad():
            run_policy(policy, states)
    finally:
        for handle in handles:
            handle.remove()
    return [torch.cat(chunks) for chunks in seen]


def quantize_activation(x: torch.Tensor, precision: str, bounds: Range) -> torch.Tensor:
    """``x`` at ``precision`` with the calibrated ``bounds``: an integer grid's range, a tensor-scaled format's
    (fp8's) scale; unused by block-scaled formats (MX, NVFP4), whose scales come from each block at run time."""
    kind = number_format(precision)
    if kind.tensor_scaled:
        return kind.round_trip(x, torch.maximum(bounds.low.abs(), bounds.high.abs()).max())
    if kind.is_format or kind.is_float:
        return kind.round_trip(x)
    return activation_grid(x, bounds.low, bounds.high, kind.bits)


def calibrate(values: torch.Tensor, precision: str, method: str, per_feature: bool) -> Range:
    """The range ``method`` (``minmax``, ``percentile`` or ``mse``) picks for ``values`` at ``precision``: one per
    feature (last dimension of a batch of vectors) with ``per_feature``, else one for the tensor. ``mse`` tries
    shrinking the min-max range and keeps the fraction with the least squared error of the quantized values."""
    columns = per_feature and values.dim() == 2
    flat = values.reshape(-1, values.shape[-1]) if columns else values.reshape(-1, 1)
    if method == "percentile":
        bounds = np.percentile(flat.double().numpy(), [100 - PERCENTILE, PERCENTILE], axis=0)
        low, high = torch.as_tensor(bounds[0]).float(), torch.as_tensor(bounds[1]).float()
    else:
        low, high = flat.min(dim=0).values, flat.max(dim=0).values
    if method == "mse":
        errors = [
            float(torch.mean((quantize_activation(flat, precision, Range(low * s, high * s)) - flat) ** 2))
            for s in MSE_SHRINKS
        ]
        shrink = float(MSE_SHRINKS[int(np.argmin(errors))])
        low, high = low * shrink, high * shrink
    return Range(low, high) if columns else Range(low[0], high[0])


def install(policy: nn.Module, spec: QuantSpec, states: np.ndarray) -> list[str]:
    """Calibrate ``spec``'s activation, observation and output quantizers on ``states`` and hook them into
    ``policy`` (in place: the quantized copy). Returns what was quantized, ``layer: precision``. A recurrent
    policy's first acting layer is its LSTM (its input the observation); its state is rounded by
    :mod:`~quarl_bench.quant.recurrent_state`, installed before."""
    described: list[str] = []
    named = [*acting_lstms(policy), *acting_layers(policy)]
    layers: list[nn.Module] = [module for _, module in named]
    names = [name for name, _ in named]
    plan: list[tuple[nn.Module, str, bool, str]] = []  # (layer, precision, per_feature, where)
    for i, layer in enumerate(layers):
        if i == 0 and spec.obs_bits == "fp32":
            continue
        if i == 0 and spec.obs_bits:
            plan.append((layer, spec.obs_bits, True, "input"))
        elif spec.act_bits:
            plan.append((layer, spec.act_bits, False, "input"))
    outputs = output_layers(policy) if spec.out_bits else []
    described += _install_inner(policy, spec, states)
    if spec.calibration_method == "dynamic":
        return described + _install_dynamic(plan, outputs, spec.out_bits, layers, names)
    inputs = record_tensors(policy, states, [p[0] for p in plan], output=False)
    produced = record_tensors(policy, states, outputs, output=True)
    for (input_layer, precision, per_feature, _), values in zip(plan, inputs, strict=True):
        bounds = calibrate(values, precision, spec.calibration_method, per_feature)
        input_layer.register_forward_pre_hook(_input_hook(precision, bounds))
        described.append(f"{names[layers.index(input_layer)]} input: {precision}")
    for output_layer, values in zip(outputs, produced, strict=True):
        bounds = calibrate(values, spec.out_bits, spec.calibration_method, False)
        output_layer.register_forward_hook(_output_hook(spec.out_bits, bounds))
        described.append(f"{names[layers.index(output_layer)]} output: {spec.out_bits}")
    return described


INNER = {"norm_bits": (nn.LayerNorm, nn.GroupNorm), "softmax_bits": (nn.Softmax,)}


def _install_inner(policy: nn.Module, spec: QuantSpec, states: np.ndarray) -> list[str]:
    """``norm_bits``/``softmax_bits``: the outputs of every norm or softmax module, each on its own range.

    :raises QuarlError: where the policy has no such module (an attention's functional softmax has none).
    """
    from quarl_bench.errors import QuarlError

    described = []
    for field, kinds in INNER.items():
        precision = getattr(spec, field)
        if not precision:
            continue
        found = [(name, m) for name, m in policy.named_modules() if isinstance(m, kinds)]
        if not found:
            flag = "--" + field.replace("_", "-")
            raise QuarlError(
                f"{flag} {precision}: this policy has no {' or '.join(k.__name__ for k in kinds)} module to round "
                "(a functional softmax or nn.MultiheadAttention's is out of reach); expected a policy with one"
            )
        modules = [m for _, m in found]
        if spec.calibration_method == "dynamic":
            hooks = [lambda _m, _i, out, p=precision: dynamic_round_trip(out, p) for _ in modules]
        else:
            produced = record_tensors(policy, states, modules, output=True)
            hooks = [_output_hook(precision, calibrate(v, precision, spec.calibration_method, False)) for v in produced]
        for (name, module), hook in zip(found, hooks, strict=True):
            module.register_forward_hook(hook)
            described.append(f"{name} output: {precision}")
    return described


def _install_dynamic(
    plan: list[tuple[nn.Module, str, bool, str]],
    outputs: Sequence[nn.Module],
    out_bits: str,
    layers: list[nn.Module],
    names: list[str],
) -> list[str]:
    """The ``dynamic`` method's hooks: each tensor on the grid of its own range, per batch row."""
    described = []
    for layer, precision, _, _ in plan:
        layer.register_forward_pre_hook(lambda _m, inputs, p=precision: (dynamic_round_trip(inputs[0], p), *inputs[1:]))
        described.append(f"{names[layers.index(layer)]} input: {precision} (dynamic)")
    for layer in outputs:
        layer.register_forward_hook(lambda _m, _i, output, p=out_bits: dynamic_round_trip(output, p))
        described.append(f"{names[layers.index(layer)]} output: {out_bits} (dynamic)")
    return described


def dynamic_round_trip(x: torch.Tensor, precision: str) -> torch.Tensor:
    """``x`` with each batch row on the grid of that row's own range (ONNX Runtime's ``DynamicQuantizeLinear`` on
    the one observation of a call; formats round as they are defined)."""
    kind = number_format(precision)
    if not kind.is_int:
        return quantize_activation(x, precision, Range(x.min(), x.max()))
    if x.dim() < 2:
        return activation_grid(x, x.min(), x.max(), kind.bits)
    rows = x.reshape(x.shape[0], -1)
    shape = (x.shape[0],) + (1,) * (x.dim() - 1)
    return activation_grid(x, rows.min(dim=1).values.reshape(shape), rows.max(dim=1).values.reshape(shape), kind.bits)


def _input_hook(precision: str, bounds: Range) -> Callable:
    def quantize_input(_module, inputs):
        return (quantize_activation(inputs[0], precision, bounds), *inputs[1:])

    return quantize_input


def _output_hook(precision: str, bounds: Range) -> Callable:
    def quantize_output(_module, _inputs, output):
        return quantize_activation(output, precision, bounds)

    return quantize_output
