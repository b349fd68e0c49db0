"""Barnard's exact test at a fixed number of trials, the batch baseline robot papers use to compare success rates,
as a rejection region: every table (x_a successes of n, x_b of n) at once, so its power at any pair of rates is a
sum of binomial probabilities (the benchmarks compare it with certify's sequential test at equal power).

The p-values are scipy's ``barnard_exact(..., alternative="greater")`` (pooled Wald statistic, the nuisance rate
maximised over [0, 1]) for every table of one size together: scipy computes one table per call, and a region of
n = 400 has 160,801 tables. The nuisance maximum is taken on a grid (:data:`NUISANCE_GRID` points), a lower bound
of scipy's optimum; ``tests/test_trial_counts.py`` holds both to within 1e-3 on sampled tables.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

NUISANCE_GRID = 400
CHUNK = 25  # nuisance rates per pass: n = 600 holds 361,201 tables, so a pass is 9M probabilities


def wald_statistics(n: int) -> np.ndarray:
    """The pooled Wald statistic of every table, ``[x_a, x_b]``: large when policy a's rate is above b's."""
    x = np.arange(n + 1, dtype=float)
    a, b = x[:, None] / n, x[None, :] / n
    pooled = (a + b) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = (a - b) / np.sqrt(pooled * (1 - pooled) * 2 / n)
    statistic[a == b] = 0.0
    return statistic


def margin_statistics(n: int, margin: float) -> np.ndarray:
    """The non-inferiority statistic of every table ``[x_a, x_b]``: ``(p̂_a - p̂_b + ε)`` over its standard error at
    the null boundary's rates (``p_b`` from the pooled rate, ``p_a = p_b - ε``, clipped into (0, 1))."""
    x = np.arange(n + 1, dtype=float)
    a, b = x[:, None] / n, x[None, :] / n
    rate_b = np.clip((a + b) / 2 + margin / 2, 1e-9, 1 - 1e-9)
    rate_a = np.clip(rate_b - margin, 1e-9, 1 - 1e-9)
    return (a - b + margin) / np.sqrt((rate_a * (1 - rate_a) + rate_b * (1 - rate_b)) / n)


def p_values(n: int, grid: int = NUISANCE_GRID, margin: float = 0.0) -> np.ndarray:
    """Barnard's one-sided p-value (H1: a's rate above b's) of every table ``[x_a, x_b]`` of ``n`` trials each; with
    ``margin`` ε, the exact unconditional non-inferiority test's (H1: a's rate above b's - ε; the nuisance on the null
    boundary ``p_a = p_b - ε``)."""
    statistic = (margin_statistics(n, margin) if margin else wald_statistics(n)).ravel()
    order = np.argsort(-statistic, kind="stable")
    ranked = statistic[order]
    # a table's tail holds every table at least as extreme: ties end their group together
    last_of_tie = np.searchsorted(-ranked, -ranked, side="right") - 1
    tails = np.zeros(statistic.size)
    nuisance = np.linspace(margin, 1.0, grid)  # b's rate; a's is margin below it
    chunk = max(1, CHUNK * 361_201 // (n + 1) ** 2)  # a pass's probabilities bounded for memory
    for start in range(0, grid, chunk):
        rates = nuisance[start : start + chunk]
        pmf_b = stats.binom.pmf(np.arange(n + 1)[None, :], n, rates[:, None])  # (rates, x)
        pmf_a = stats.binom.pmf(np.arange(n + 1)[None, :], n, rates[:, None] - margin)
        table = (pmf_a[:, :, None] * pmf_b[:, None, :]).reshape(len(rates), -1)[:, order]
        tails = np.maximum(tails, np.cumsum(table, axis=1)[:, last_of_tie].max(axis=0))
    found = np.empty_like(tails)
    found[order] = tails
    return np.minimum(found, 1.0).reshape(n + 1, n + 1)


def rejection_region(n: int, alpha: float, margin: float = 0.0, grid: int = NUISANCE_GRID) -> np.ndarray:
    """Which tables ``[x_a, x_b]`` of ``n`` trials each Barnard's test (at ``margin``: the non-inferiority test)
    rejects at one-sided level ``alpha``."""
    return p_values(n, grid, margin) <= alpha


def power(region: np.ndarray, rate_a: float, rate_b: float) -> float:
    """The probability that ``region`` (of n trials each) rejects when a succeeds at ``rate_a`` and b at
    ``rate_b``."""
    n = region.shape[0] - 1
    x = np.arange(n + 1)
    return float(stats.binom.pmf(x, n, rate_a) @ region @ stats.binom.pmf(x, n, rate_b))


def normal_trials(rate_a: float, rate_b: float, alpha: float, target: float, margin: float = 0.0) -> int:
    """Trials per policy the pooled two-proportion z-test needs for power ``target`` (the large-n form of
    Barnard's test, for gaps too small to enumerate; at ``margin``, of the non-inferiority test)."""
    z_alpha, z_beta = stats.norm.ppf(1 - alpha), stats.norm.ppf(min(target, 0.999))
    pooled = (rate_a + rate_b) / 2
    spread = z_alpha * math.sqrt(2 * pooled * (1 - pooled)) + z_beta * math.sqrt(
        rate_a * (1 - rate_a) + rate_b * (1 - rate_b)
    )
    return math.ceil((spread / abs(rate_a - rate_b + margin)) ** 2)


class FixedTrials:
    """Barnard's test (or, at ``margin``, the exact non-inferiority test) at a ladder of sizes, each region computed
    once: the fewest trials per policy that reach a power, for any pair of rates."""

    def __init__(self, alpha: float, sizes: list[int], margin: float = 0.0, grid: int = NUISANCE_GRID) -> None:
        self.alpha, self.sizes, self.margin, self.grid = alpha, sorted(sizes), margin, grid
        self.regions: dict[int, np.ndarray] = {}

    def region(self, n: int) -> np.ndarray:
        if n not in self.regions:
            self.regions[n] = rejection_region(n, self.alpha, self.margin, self.grid)
        return self.regions[n]

    def fewest(self, rate_a: float, rate_b: float, target: float, largest: int) -> tuple[int, str]:
        """The fewest trials per policy, up to ``largest``, whose exact power reaches ``target``: bisection on n
        (bracketed about the normal approximation's n, widened where the bracket does not hold), then the 5 sizes
        below the one found (a discrete test's power is not monotone in n); past ``largest``, the normal
        approximation."""
        reaches = lambda n: power(self.region(n), rate_a, rate_b) >= target  # noqa: E731
        guess = normal_trials(rate_a, rate_b, self.alpha, target, self.margin)
        if guess > 4 * largest or not reaches(largest):
            return max(guess, largest + 1), "normal"
        high = min(largest, math.ceil(1.25 * guess) + 5)
        high = high if reaches(high) else largest
        low = max(0, int(0.8 * guess) - 5)
        low = low if low and not reaches(low) else 0  # low fails (no trials: no power), high reaches
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if reaches(middle) else (middle, high)
        found = high
        for n in range(high - 1, max(high - 6, 0), -1):
            if reaches(n):
                found = n
        return found, "exact"

    def trials_for(self, rate_a: float, rate_b: float, target: float) -> tuple[int, str]:
        """The fewest trials per policy on the ladder whose power at (rate_a, rate_b) reaches ``target``, and how
        it was found (``exact``; ``normal approximation`` past the ladder's largest size)."""
        for n in self.sizes:
            if power(self.region(n), rate_a, rate_b) >= target:
                return n, "exact"
        return max(normal_trials(rate_a, rate_b, self.alpha, target), self.sizes[-1] + 1), "normal approximation"
