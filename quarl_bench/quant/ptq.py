"""Post-training quantization: apply a QuantSpec to a copy of an SB3 policy's acting network."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from stable_baselines3.common.policies import BasePolicy
from torch import nn

from quarl_bench.quant.affine import cast_round_trip, fake_quant, quant_step
from quarl_bench.types import LayerStats, QuantSpec

# Sub-modules of each algorithm's policy that choose actions. Critics, value heads and target networks
# are never quantized: they do not act.
ACTING_MODULES: dict[str, tuple[str, ...]] = {
    "a2c": ("pi_features_extractor", "features_extractor", "mlp_extractor.policy_net", "action_net"),
    "ppo": ("pi_features_extractor", "features_extractor", "mlp_extractor.policy_net", "action_net"),
    "dqn": ("q_net",),
    "qrdqn": ("quantile_net",),
    "ddpg": ("actor",),
    "td3": ("actor",),
    "sac": ("actor",),
}
_FLOAT_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
KL_BINS = 256
PROFILE_BINS = 100


def acting_layers(policy: BasePolicy, algo: str) -> Iterator[tuple[str, nn.Module]]:
    """Yield ``(name, module)`` for each Linear/Conv layer that the policy acts with, each once.

    For PPO/A2C the features extractor is acting only when it is shared with the actor
    (``share_features_extractor=True``, SB3's default); a separate ``vf_features_extractor`` is skipped.
    """
    prefixes = ACTING_MODULES[algo]
    vf_extractor = getattr(policy, "vf_features_extractor", None)
    pi_extractor = getattr(policy, "pi_features_extractor", None)
    skip_shared = algo in ("a2c", "ppo") and pi_extractor is not None and vf_extractor is not pi_extractor
    seen: set[int] = set()
    for name, module in policy.named_modules(remove_duplicate=False):
        if not isinstance(module, nn.Linear | nn.Conv1d | nn.Conv2d | nn.Conv3d):
            continue
        if not any(name == p or name.startswith(p + ".") for p in prefixes):
            continue
        if skip_shared and name.startswith("features_extractor."):
            continue
        if id(module) in seen:
            continue
        seen.add(id(module))
        yield name, module


def quantize_tensor(weight: torch.Tensor, spec: QuantSpec, is_conv: bool) -> torch.Tensor:
    """The fake-quantized tensor for ``spec`` (the op QAT reuses); identity for fp32."""
    if spec.is_identity:
        return weight
    if spec.precision in _FLOAT_DTYPES:
        return cast_round_trip(weight, _FLOAT_DTYPES[spec.precision])
    return fake_quant(weight, spec.bits, per_channel=_per_channel(spec, is_conv), symmetric=spec.symmetric)


def quantize(policy: BasePolicy, algo: str, spec: QuantSpec) -> tuple[BasePolicy, tuple[LayerStats, ...]]:
    """Return a quantized deep copy of ``policy`` and per-layer statistics; ``policy`` is left untouched."""
    quantized = clone_policy(policy)
    stats: list[LayerStats] = []
    with torch.no_grad():
        for name, module in acting_layers(quantized, algo):
            is_conv = not isinstance(module, nn.Linear)
            tensors = [("weight", module.weight)]
            if spec.quantize_bias and module.bias is not None:
                tensors.append(("bias", module.bias))
            for kind, param in tensors:
                original = param.detach().clone()
                param.copy_(quantize_tensor(original, spec, is_conv))
                stats.append(layer_stats(f"{name}.{kind}", original, param.detach(), spec, is_conv))
    return quantized, tuple(stats)


def weight_profile(policy: BasePolicy, algo: str, bins: int = PROFILE_BINS) -> dict[str, object]:
    """Spread of all acting weights pooled (QuaRL Figure 2/3): std, range, excess kurtosis and a histogram."""
    with torch.no_grad():
        weights = torch.cat([module.weight.detach().flatten().double() for _, module in acting_layers(policy, algo)])
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
    """KL divergence between the value histograms of two tensors over shared bins (QuaRL's ``kl-div``)."""
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
