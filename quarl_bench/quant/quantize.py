"""Post-training quantization: apply a QuantSpec to a copy of an SB3 policy's acting network."""

from __future__ import annotations

import copy
from typing import TypeVar

import numpy as np
import torch
from stable_baselines3.common.policies import BasePolicy

from quarl_bench.errors import QuarlError
from quarl_bench.families import family_of
from quarl_bench.quant.affine import as_groups, fake_quant, group_grid, quant_step
from quarl_bench.quant.fold import fold_actor_batch_norms
from quarl_bench.quant.layers import acting_layers, selected_tensors
from quarl_bench.quant.prune import prune_acting
from quarl_bench.types import LayerStats, QuantSpec

PolicyT = TypeVar("PolicyT", bound=BasePolicy)

KL_BINS = 256
PROFILE_BINS = 100


def quantize_tensor(weight: torch.Tensor, spec: QuantSpec, is_conv: bool, gates: int = 1) -> torch.Tensor:
    """The fake-quantized tensor for ``spec`` (the op QAT reuses); identity for fp32. ``gates`` > 1: the tensor
    stacks that many layers along its first dimension (an LSTM's gates), each on grids of its own."""
    if gates > 1:
        return torch.cat([quantize_tensor(part, spec, is_conv) for part in weight.chunk(gates, dim=0)])
    number_format = spec.number_format
    if number_format.is_float:
        return number_format.round_trip(weight)
    if number_format.is_format:  # straight through: QAT's gradient passes the rounding unchanged
        return weight + (number_format.round_trip(weight.detach()) - weight).detach()
    per_channel = _per_channel(spec, is_conv)
    return fake_quant(weight, spec.bits, per_channel=per_channel, symmetric=spec.symmetric, group_size=spec.group_size)


def grid_noise(weight: torch.Tensor, spec: QuantSpec, is_conv: bool) -> torch.Tensor:
    """Uniform noise in ±half a step of ``spec``'s integer grid for ``weight`` (per channel where the spec's grid
    is): what rounding to that grid may add, drawn afresh (weight-noise injection). Float formats: ±half the
    round trip's largest error."""
    if not spec.number_format.is_int or spec.group_size:
        error = (quantize_tensor(weight, spec, is_conv) - weight).abs()
        step = 2 * error.amax(dim=tuple(range(1, weight.dim())), keepdim=True) if weight.dim() > 1 else 2 * error.max()
    else:
        step = quant_step(weight, spec.bits, _per_channel(spec, is_conv), spec.symmetric)
    return (torch.rand_like(weight) - 0.5) * step


def quantize(
    policy: BasePolicy, spec: QuantSpec, states: np.ndarray | None = None
) -> tuple[BasePolicy, tuple[LayerStats, ...]]:
    """Return a quantized deep copy of ``policy`` and per-tensor statistics; ``policy`` is left untouched.

    Which tensors: ``spec.layers`` (see :mod:`quarl_bench.quant.layers`); with ``spec.layer_precisions``, acting
    layer ``i`` (and its bias with ``quantize_bias``) at precision ``i``, fp32 layers untouched. In order: pruning
    (fp32 weights), weight rounding (RTN, or GPTQ / learned rounding on ``states``), then activation quantizers
    calibrated on ``states`` (see :mod:`quarl_bench.quant.activations`). An actor's batch-norm layers (CrossQ) are
    folded into the Linear after them first (:mod:`quarl_bench.quant.fold`): their weights are what is quantized.

    :param states: calibration observations (``evaluation/calibration.py``); needed when ``spec.calibrated``.
    """
    quantized = clone_policy(policy)
    stats: list[LayerStats] = []
    if spec.is_identity:
        return quantized, ()
    if spec.calibrated and (states is None or not len(states)):
        raise QuarlError(f"{spec.recipe_label()} needs calibration states: none were given")
    refusal = family_of(policy).torch_refusal(policy)
    if (spec.calibrated or spec.activations or spec.ptq != "rtn") and refusal:
        raise QuarlError(refusal)
    fold_actor_batch_norms(quantized)
    tensors = selected_tensors(quantized, spec.layers, spec.quantize_bias)
    if spec.ptq != "rtn" and not any(t.kind == "weight" for t in tensors):
        raise QuarlError(f"--ptq {spec.ptq}: this policy has no quantizable layer (expected Linear or Conv layers)")
    originals = {id(t): getattr(t.module, t.kind).detach().clone() for t in tensors}
    if spec.prune:
        prune_acting(quantized, spec.prune, spec.prune_structure)
    if spec.ptq != "rtn":
        from quarl_bench.quant.calibrated import calibrated_weights

        calibrated_weights(quantized, spec, states, lambda is_conv: _per_channel(spec, is_conv))
    layer_index = (
        {id(module): i for i, (_, module) in enumerate(acting_layers(quantized))} if spec.layer_precisions else {}
    )
    if spec.layer_precisions and any(t.gates > 1 for t in tensors):
        raise QuarlError(
            "per-layer precisions: a recurrent policy's LSTM is not one of its acting layers (expected one "
            "precision for the whole policy, --bits P)"
        )
    if spec.layer_precisions and len(spec.layer_precisions) != len(layer_index):
        raise QuarlError(
            f"bad layer precisions {','.join(spec.layer_precisions)}: this policy acts with "
            f"{len(layer_index)} layers ({', '.join(acting_layer_names(policy))}), one precision each"
        )
    with torch.no_grad():
        for tensor in tensors:
            layer_spec = spec.for_layer(layer_index[id(tensor.module)]) if spec.layer_precisions else spec
            param = getattr(tensor.module, tensor.kind)
            if not (spec.ptq != "rtn" and tensor.kind == "weight"):  # calibrated rounding already placed weights
                param.copy_(quantize_tensor(param.detach().clone(), layer_spec, tensor.is_conv, tensor.gates))
            original = originals[id(tensor)]
            if layer_spec.precision != "fp32" or not torch.equal(original, param):
                stats.append(layer_stats(tensor.name, original, param.detach(), layer_spec, tensor.is_conv))
    if spec.state_bits:  # first: the activation ranges are then calibrated with the state rounded
        from quarl_bench.quant.recurrent_state import install_state_quantizer

        assert states is not None  # spec.calibrated (state bits are activations): checked above
        install_state_quantizer(quantized, spec.state_bits, spec.calibration_method or "minmax", states)
    if spec.activations:
        from quarl_bench.quant.activations import install

        assert states is not None
        install(quantized, spec, states)
    return quantized, tuple(stats)


def acting_layer_names(policy: BasePolicy) -> list[str]:
    """The acting layers' names, in the order per-layer precisions refer to them."""
    return [name for name, _ in acting_layers(policy)]


def acting_bytes(policy: BasePolicy, spec: QuantSpec) -> int:
    """Bytes of the acting layers stored at ``spec``'s precisions: weights at their bits (rounded up per tensor),
    plus the scales of group-wise grids (fp16 scale and zero point per group) and of MX/NVFP4 blocks; biases at 32
    bits unless quantized with their layer. Pruned: only nonzero weights, plus a 1-bit mask per weight for
    unstructured sparsity (pruned neurons' rows are simply absent). ``policy``: the pruned one, where pruned."""
    from quarl_bench.quant.layers import lstm_tensors

    total_bits = 0
    for tensor in lstm_tensors(policy, lambda name: name.startswith("lstm_actor"), lambda _: True):
        numel = getattr(tensor.module, tensor.kind).numel()
        total_bits += numel * (spec.bits if tensor.kind.startswith("weight") or spec.quantize_bias else 32)
    for i, (_, module) in enumerate(acting_layers(policy)):
        layer_spec = spec.for_layer(i) if spec.layer_precisions else spec
        weight = module.weight.detach()
        stored = int(torch.count_nonzero(weight)) if spec.prune else weight.numel()
        weight_bits = stored * layer_spec.bits
        if spec.prune and spec.prune_structure == "unstructured":
            weight_bits += weight.numel()
        if layer_spec.group_size:
            weight_bits += len(as_groups(weight, layer_spec.group_size)[0]) * 32
        if layer_spec.number_format.is_format:
            weight_bits += layer_spec.number_format.scale_bits_of(weight.numel())
        total_bits += -(-weight_bits // 8) * 8
        if module.bias is not None:
            total_bits += module.bias.numel() * (layer_spec.bits if spec.quantize_bias else 32)
    return total_bits // 8


def weight_profile(policy: BasePolicy, bins: int = PROFILE_BINS) -> dict[str, object]:
    """Spread of all acting weights pooled (QuaRL Figure 2/3): std, range, excess kurtosis and a histogram."""
    with torch.no_grad():
        tensors = [getattr(t.module, t.kind) for t in selected_tensors(policy) if t.kind != "bias"]
        weights = torch.cat([tensor.detach().flatten().double() for tensor in tensors])
    lo, hi = float(weights.min()), float(weights.max())
    centred = weights - weights.mean()
    variance = float(torch.mean(centred**2))
    kurtosis = float(torch.mean(centred**4)) / variance**2 - 3.0 if variance > 0 else 0.0
    return {
        "count": int(weights.numel()),
        "std": variance**0.5,
        "min": lo,
        "max": hi,
        "range": abs(lo) + abs(hi),  # QuaRL's range, which sets the grid step
        "kurtosis": kurtosis,
        "histogram": torch.histc(weights, bins=bins, min=lo, max=hi).long().tolist() if hi > lo else [len(weights)],
    }


def clone_policy(policy: PolicyT) -> PolicyT:
    """A fresh copy built the way SB3's ``BasePolicy.load`` does (deepcopy fails on gSDE's non-leaf tensors); a
    policy whose saved parameters its own class does not take (sb3-contrib's ARS linear policy reports ``net_arch``)
    is deep-copied (sb3-contrib's recurrent policy omits its LSTM's size: read from the LSTM)."""
    from quarl_bench.families.recurrent import constructor_parameters

    try:
        clone = type(policy)(**policy._get_constructor_parameters(), **constructor_parameters(policy))
    except TypeError:
        clone = copy.deepcopy(policy)
    clone.load_state_dict(policy.state_dict())
    clone.set_training_mode(False)
    return clone


def layer_stats(
    name: str, original: torch.Tensor, quantized: torch.Tensor, spec: QuantSpec, is_conv: bool
) -> LayerStats:
    """Weight range, mean grid step, MSE and histogram KL(fp32 || quantized) of one tensor."""
    step = 0.0
    if spec.number_format.is_int and spec.group_size:
        step = float(group_grid(as_groups(original, spec.group_size)[0], spec.bits, spec.symmetric)[0].mean())
    elif spec.number_format.is_int:
        step = float(quant_step(original, spec.bits, _per_channel(spec, is_conv), spec.symmetric).mean())
    return LayerStats(
        name=name,
        shape=tuple(original.shape),
        weight_min=float(original.min()),
        weight_max=float(original.max()),
        step=step,
        mse=float(torch.mean((original - quantized) ** 2)),
        kl_div=histogram_kl(original, quantized),
    )


def histogram_kl(original: torch.Tensor, quantized: torch.Tensor, bins: int = KL_BINS) -> float:
    """KL(fp32 || quantized) between the two tensors' value histograms: 256 equal bins over their joint range,
    each normalised to sum 1, with 1e-10 added to every bin.

    Not the original QuaRL code's ``kl-div``, which fits a Gaussian KDE to each tensor and evaluates the two
    densities at points that do not match; a histogram KL is deterministic, cheap and comparable across runs.
    """
    lo = float(torch.minimum(original.min(), quantized.min()))
    hi = float(torch.maximum(original.max(), quantized.max()))
    if hi <= lo:
        return 0.0
    p = torch.histc(original.double().flatten(), bins=bins, min=lo, max=hi)
    q = torch.histc(quantized.double().flatten(), bins=bins, min=lo, max=hi)
    eps = 1e-10
    p, q = p / p.sum() + eps, q / q.sum() + eps
    return float(torch.sum(p * torch.log(p / q)))


def _per_channel(spec: QuantSpec, is_conv: bool) -> bool:
    if spec.granularity == "auto":
        return is_conv
    return spec.granularity == "per-channel"
