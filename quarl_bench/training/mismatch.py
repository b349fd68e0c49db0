"""How far a quantized behaviour policy π_q is from the fp32 policy π on the states it visited: the per-update
diagnostics of quantized rollouts (KL, importance ratios, greedy agreement, entropies). Pure torch, no envs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from stable_baselines3.common.distributions import Distribution as SB3Distribution
from torch.distributions import Categorical, Distribution, Normal, kl_divergence

from quarl_bench.errors import QuarlError


def concat_distributions(parts: Sequence[Distribution]) -> Distribution:
    """One distribution over the states of all ``parts`` (per-step distributions of a rollout, in step order)."""
    categorical = [p for p in parts if isinstance(p, Categorical)]
    if categorical and len(categorical) == len(parts):
        return Categorical(logits=torch.cat([p.logits for p in categorical]))
    normal = [p for p in parts if isinstance(p, Normal)]
    if normal and len(normal) == len(parts):
        return Normal(torch.cat([p.loc for p in normal]), torch.cat([p.scale for p in normal]))
    raise TypeError(f"no rollout diagnostics for {type(parts[0]).__name__} policies: expected Categorical or Normal")


def torch_distribution(dist: SB3Distribution) -> Distribution:
    """The torch distribution inside SB3's.

    :raises QuarlError: for a list of them (MultiDiscrete, MultiBinary actions): no rollout diagnostics.
    """
    inner = dist.distribution
    if isinstance(inner, list):
        raise QuarlError("quantized rollouts take Discrete or Box actions: expected one action distribution")
    return inner


def _per_state(values: torch.Tensor, dist: Distribution) -> torch.Tensor:
    """Sum a diagonal Gaussian's per-dimension terms into one value per state."""
    return values.sum(dim=-1) if isinstance(dist, Normal) else values


def greedy_agreement(p: Distribution, q: Distribution, low: np.ndarray | None, high: np.ndarray | None) -> float:
    """Share of states where both greedy actions agree (discrete: same argmax). Continuous: 1 - mean |Δ| / range of
    the clipped means, per dimension (1: identical, 0: opposite bounds), as ActorQ's actor-vs-learner agreement."""
    if isinstance(p, Categorical) and isinstance(q, Categorical):
        return float((p.probs.argmax(-1) == q.probs.argmax(-1)).float().mean())
    assert isinstance(p, Normal) and isinstance(q, Normal) and low is not None and high is not None
    low_t, high_t = torch.as_tensor(low, dtype=p.loc.dtype), torch.as_tensor(high, dtype=p.loc.dtype)
    span = high_t - low_t
    difference = (torch.clamp(p.loc, low_t, high_t) - torch.clamp(q.loc, low_t, high_t)).abs() / span
    return float(1.0 - torch.clamp(difference.mean(), 0.0, 1.0))


def mismatch_stats(
    p: Distribution,
    q: Distribution,
    log_p: torch.Tensor,
    log_q: torch.Tensor,
    cap: float,
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
) -> dict[str, float]:
    """Diagnostics of one rollout whose actions were drawn from ``q``.

    :param p: the fp32 policy's distribution at each visited state; ``q``: the behaviour (quantized) policy's.
    :param log_p: log π(a|s) of the actions taken; ``log_q``: log π_q(a|s) of the same actions.
    :param cap: the ratio cap C: ``share_capped`` counts ratios above C (TIS clips them), ``share_masked`` ratios
        outside [1/C, C] (MIS drops them).
    :return: ``kl`` (exact KL(π_q ‖ π) averaged over states), ``kl_k3`` (Schulman's k3 estimate of the same KL from
        the sampled actions: mean of r - 1 - log r, r = π/π_q), ``ratio_mean``, ``ratio_max``, ``share_capped``,
        ``share_masked``, ``agreement`` (:func:`greedy_agreement`), ``entropy_fp32`` and ``entropy_behaviour``.
    """
    log_ratio = (log_p - log_q).double()
    ratio = torch.exp(log_ratio)
    return {
        "kl": float(_per_state(kl_divergence(q, p), q).clamp(min=0).mean()),  # identical policies: -1e-9, not 0
        "kl_k3": float(((ratio - 1) - log_ratio).mean()),
        "ratio_mean": float(ratio.mean()),
        "ratio_max": float(ratio.max()),
        "share_capped": float((ratio > cap).double().mean()),
        "share_masked": float(((ratio > cap) | (ratio < 1 / cap)).double().mean()),
        "agreement": greedy_agreement(p, q, low, high),
        "entropy_fp32": float(_per_state(p.entropy(), p).mean()),
        "entropy_behaviour": float(_per_state(q.entropy(), q).mean()),
    }


def correction_weights(log_p: torch.Tensor, log_q: torch.Tensor, correction: str, cap: float) -> torch.Tensor:
    """Per-sample weights of the policy-gradient term: ``tis`` min(π/π_q, C), ``mis`` 1 inside [1/C, C] and 0 outside
    (the sample is dropped), ``none`` 1 (the naive loss)."""
    ratio = torch.exp(log_p - log_q)
    if correction == "tis":
        return torch.clamp(ratio, max=cap)
    if correction == "mis":
        return ((ratio >= 1 / cap) & (ratio <= cap)).to(ratio.dtype)
    return torch.ones_like(ratio)
