"""Post-training quantization: apply a QuantSpec to a copy of an SB3 policy's acting network."""

from __future__ import annotations

import torch
from stable_baselines3.common.policies import BasePolicy

from quarl_bench.errors import QuarlError
from quarl_bench.quant.affine import cast_round_trip, fake_quant, quant_step
from quarl_bench.quant.layers import acting_layers, selected_tensors
from quarl_bench.types import LayerStats, QuantSpec

_FLOAT_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
KL_BINS = 256
PROFILE_BINS = 100


def quantize_tensor(weight: torch.Tensor, spec: QuantSpec, is_conv: bool) -> torch.Tensor:
    """The fake-quantized tensor for ``spec`` (the op QAT reuses); identity for fp32."""
    if spec.is_identity:
        return weight
    if spec.precision in _FLOAT_DTYPES:
        return cast_round_trip(weight, _FLOAT_DTYPES[spec.precision])
    return fake_quant(weight, spec.bits, per_channel=_per_channel(spec, is_conv), symmetric=spec.symmetric)


def quantize(policy: BasePolicy, spec: QuantSpec) -> tuple[BasePolicy, tuple[LayerStats, ...]]:
    """Return a quantized deep copy of ``policy`` and per-tensor statistics; ``policy`` is left untouched.

    Which tensors: ``spec.layers`` (see :mod:`quarl_bench.quant.layers`); with ``spec.layer_precisions``, acting
    layer ``i`` (and its bias with ``quantize_bias``) at precision ``i``, fp32 layers untouched.
    """
    quantized = clone_policy(policy)
    stats: list[LayerStats] = []
    if spec.is_identity:
        return quantized, ()
    tensors = selected_tensors(quantized, spec.layers, spec.quantize_bias)
    layer_index = (
        {id(module): i for i, (_, module) in enumerate(acting_layers(quantized))} if spec.layer_precisions else {}
    )
    if spec.layer_precisions and len(spec.layer_precisions) != len(layer_index):
        raise QuarlError(
            f"bad layer precisions {','.join(spec.layer_precisions)}: this policy acts with "
            f"{len(layer_index)} layers ({', '.join(acting_layer_names(policy))}), one precision each"
        )
    with torch.no_grad():
        for tensor in tensors:
            layer_spec = spec.for_layer(layer_index[id(tensor.module)]) if spec.layer_precisions else spec
            if layer_spec.is_identity:
                continue
            param = getattr(tensor.module, tensor.kind)
            original = param.detach().clone()
            param.copy_(quantize_tensor(original, layer_spec, tensor.is_conv))
            stats.append(layer_stats(tensor.name, original, param.detach(), layer_spec, tensor.is_conv))
    return quantized, tuple(stats)


def acting_layer_names(policy: BasePolicy) -> list[str]:
    """The acting layers' names, in the order per-layer precisions refer to them."""
    return [name for name, _ in acting_layers(policy)]


def acting_bytes(policy: BasePolicy, spec: QuantSpec) -> int:
    """Bytes of the acting layers stored at ``spec``'s precisions: weights at their bits (rounded up per tensor),
    biases at 32 bits unless quantized with their layer."""
    total_bits = 0
    for i, (_, module) in enumerate(acting_layers(policy)):
        bits = spec.for_layer(i).bits if spec.layer_precisions else spec.bits
        total_bits += -(-module.weight.numel() * bits // 8) * 8
        if module.bias is not None:
            total_bits += module.bias.numel() * (bits if spec.quantize_bias else 32)
    return total_bits // 8


def weight_profile(policy: BasePolicy, bins: int = PROFILE_BINS) -> dict[str, object]:
    """Spread of all acting weights pooled (QuaRL Figure 2/3): std, range, excess kurtosis and a histogram."""
    with torch.no_grad():
        weights = torch.cat([module.weight.detach().flatten().double() for _, module in acting_layers(policy)])
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


def clone_policy(policy: BasePolicy) -> BasePolicy:
    """A fresh copy built the way SB3's ``BasePolicy.load`` does (deepcopy fails on gSDE's non-leaf tensors)."""
    clone = type(policy)(**policy._get_constructor_parameters())
    clone.load_state_dict(policy.state_dict())
    clone.set_training_mode(False)
    return clone


def layer_stats(
    name: str, original: torch.Tensor, quantized: torch.Tensor, spec: QuantSpec, is_conv: bool
) -> LayerStats:
    """Weight range, mean grid step, MSE and histogram KL(fp32 || quantized) of one tensor."""
    step = 0.0
    if spec.precision.startswith("int"):
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
