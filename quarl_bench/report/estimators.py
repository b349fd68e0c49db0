"""Small pure statistics over per-episode rewards."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import stats


def bootstrap_ci(rewards: Sequence[float] | np.ndarray, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the mean (a constant sample gives a zero-width interval).
    Remembered per sample: a report asks for the same fp32 row's interval once per table it appears in."""
    return _bootstrap_ci(tuple(float(r) for r in rewards), confidence, seed)


@lru_cache(maxsize=65536)
def _bootstrap_ci(rewards: tuple[float, ...], confidence: float, seed: int) -> tuple[float, float]:
    values = np.asarray(rewards, dtype=float)
    if len(values) < 2 or np.all(values == values[0]):
        return float(values.mean()), float(values.mean())
    # scipy.stats.bootstrap's percentile method, vectorised: its per-call overhead made a 2,400-row report spend
    # seconds here
    means = np.random.default_rng(seed).choice(values, size=(N_RESAMPLES, len(values))).mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def paired_ratio_ci(
    base: Sequence[float], other: Sequence[float], confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """mean(base) / mean(other) and its paired percentile-bootstrap CI, resampling the pairs (seeds) together
    (fewer than two pairs: the ratio with a NaN interval)."""
    base_values, other_values = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    ratio = float(base_values.mean() / other_values.mean())
    if len(base_values) < 2:
        return ratio, float("nan"), float("nan")
    result = stats.bootstrap(
        (base_values, other_values),
        lambda b, o: np.mean(b) / np.mean(o),
        paired=True,
        confidence_level=confidence,
        n_resamples=2000,
        method="percentile",
        random_state=seed,
    )
    return ratio, float(result.confidence_interval.low), float(result.confidence_interval.high)


# rliable's interval estimates (Agarwal et al. 2021), re-implemented because rliable is archived: strata are the
# evaluation seeds of one agent (or the agents of an aggregate); resampling happens within each stratum.
Strata = Sequence[Sequence[float]]
N_RESAMPLES = 2000


def iqm(values: Sequence[float] | np.ndarray, axis: int | None = None):
    """Interquartile mean: the mean of the middle 50% (``int(n / 4)`` values trimmed from each end after sorting, as
    rliable and scipy's ``trim_mean(x, 0.25)`` do); along ``axis`` of a 2-D array, one per row."""
    array = np.asarray(values, dtype=float)
    if axis is None:
        array, axis = array.ravel(), 0
    ordered = np.sort(array, axis=axis)
    count = ordered.shape[axis]
    cut = int(0.25 * count)
    middle = np.take(ordered, np.arange(cut, count - cut), axis=axis)
    mean = middle.mean(axis=axis)
    return float(mean) if np.ndim(mean) == 0 else mean


def _pooled(strata: Strata) -> np.ndarray:
    return np.concatenate([np.asarray(s, dtype=float) for s in strata])


def _resamples(strata: Strata, rng: np.random.Generator) -> np.ndarray:
    """``N_RESAMPLES`` stratified bootstrap samples, one per row: each stratum resampled with replacement to its own
    size (all at once: a Python loop over resamples made a report of 400 rows take minutes)."""
    return np.concatenate([rng.choice(np.asarray(s, dtype=float), size=(N_RESAMPLES, len(s))) for s in strata], axis=1)


def stratified_bootstrap_ci(
    strata: Strata, statistic=iqm, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """``statistic`` of all values pooled, with a percentile CI from resampling within each stratum.

    :param statistic: a reduction taking ``axis`` (``iqm``, ``np.mean``).
    """
    point = float(statistic(_pooled(strata)))
    rng = np.random.default_rng(seed)
    draws = statistic(_resamples(strata, rng), axis=1)
    alpha = (1 - confidence) / 2
    return point, float(np.quantile(draws, alpha)), float(np.quantile(draws, 1 - alpha))


def paired_difference_ci(
    quantized: Strata, reference: Strata, statistic=np.mean, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """statistic(quantized) - statistic(reference) and its CI over paired episodes: ``quantized[i][j]`` and
    ``reference[i][j]`` are the same episode (seed stratum ``i``, the same reset seed) played by both policies, so
    every resample draws pair indices and takes both members (pairs come from ``statistics.pairing``). Where the
    policies act alike the pairs are equal and the interval is narrow; resampling the arms apart would give the
    width of two independent means."""
    if len(quantized) != len(reference):
        raise ValueError(f"{len(quantized)} quantized strata vs {len(reference)} reference strata: pair them by seed")
    q_strata = [np.asarray(q, dtype=float) for q in quantized]
    r_strata = [np.asarray(r, dtype=float) for r in reference]
    for q, r in zip(q_strata, r_strata, strict=True):
        if len(q) != len(r):
            raise ValueError(f"{len(q)} quantized vs {len(r)} reference episodes in a stratum: expected pairs")
    point = float(statistic(np.concatenate(q_strata)) - statistic(np.concatenate(r_strata)))
    rng = np.random.default_rng(seed)
    picks = [rng.integers(len(q), size=(N_RESAMPLES, len(q))) for q in q_strata]
    q_draws = np.concatenate([q[pick] for q, pick in zip(q_strata, picks, strict=True)], axis=1)
    r_draws = np.concatenate([r[pick] for r, pick in zip(r_strata, picks, strict=True)], axis=1)
    draws = statistic(q_draws, axis=1) - statistic(r_draws, axis=1)
    alpha = (1 - confidence) / 2
    return point, float(np.quantile(draws, alpha)), float(np.quantile(draws, 1 - alpha))


def probability_of_improvement(quantized: Strata, reference: Strata) -> float:
    """P(quantized >= reference) over paired episodes: 1 where the quantized policy scored more on the same
    episode, 1/2 on a tie; averaged over the pairs of each seed, then over seeds. Two identical policies give 0.5."""
    scores = []
    for q, r in zip(quantized, reference, strict=True):
        q_values, r_values = np.asarray(q, dtype=float), np.asarray(r, dtype=float)
        scores.append(float(np.mean((q_values > r_values) + 0.5 * (q_values == r_values))))
    return float(np.mean(scores))


def minimum_safe_bits(lower_differences: dict[int, float], delta: float) -> int | None:
    """The smallest bit width b whose paired difference lower bound (quantized - fp32), and that of every measured
    width above b, is at least ``-delta``; None when even the widest measured width falls short."""
    safe = None
    for bits in sorted(lower_differences, reverse=True):
        if lower_differences[bits] < -delta:
            break
        safe = bits
    return safe


def normalized_scores(rewards: Sequence[float], random_reward: float, fp32_reward: float) -> np.ndarray:
    """(R - R_random) / (R_fp32 - R_random): 0 is the random policy, 1 the fp32 policy."""
    span = fp32_reward - random_reward
    if span == 0:
        raise ValueError(f"fp32 and random policies both score {fp32_reward}: no normalisation")
    return (np.asarray(rewards, dtype=float) - random_reward) / span


def performance_profile(scores: Sequence[float] | np.ndarray, taus: Sequence[float] | np.ndarray) -> np.ndarray:
    """rliable's performance profile: for each threshold tau, the fraction of scores above it."""
    values = np.asarray(scores, dtype=float)
    return np.array([float(np.mean(values > tau)) for tau in taus])
