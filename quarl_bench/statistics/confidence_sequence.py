"""Confidence sequences for the mean paired difference: a finite-sample one for bounded returns (betting,
:mod:`quarl_bench.statistics.betting`) and the asymptotic one of Waudby-Smith, Arnold, Wu and Ramdas
("Time-uniform central limit theory and asymptotic confidence sequences", Annals of Statistics 2024; arXiv
2103.06476), Gaussian-mixture boundary, for returns with no known bounds.

Both are read after every batch: each contains the true mean at every look at once with probability ≥ 1 - α (the
betting one for every sample size; the asymptotic one only as the number of pairs grows, which is why certify takes
no asymptotic decision before a minimum number of pairs). ``lower`` and ``upper`` are each a one-sided (1 - α) bound:
a "safe" verdict reads only the lower one, an "unsafe" one only the upper one.

Written from the closed forms because the authors' ``confseq`` does not build on Python 3.11 and ``expectation``
needs 3.12; tests hold them against values worked out by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quarl_bench.statistics.betting import lower_bound, upper_bound


@dataclass(frozen=True)
class Interval:
    """The sequence's interval after ``pairs`` observations around their ``mean``."""

    pairs: int
    mean: float
    lower: float
    upper: float


def mixture_rho_squared(alpha: float, planned_pairs: int) -> float:
    """The mixing variance ρ² that makes the standardized boundary tightest at ``planned_pairs`` (the paper's t*):
    ``(-2 log α + log(-2 log α + 1)) / t*``."""
    log_term = -2 * math.log(alpha)
    return (log_term + math.log(log_term + 1)) / planned_pairs


def asymptotic_cs(values: Sequence[float] | np.ndarray, alpha: float, planned_pairs: int = 100) -> Interval:
    """The asymptotic confidence sequence for the mean of ``values`` at ``t = len(values)``, each side at level α:

    ``m_t ± σ̂_t sqrt(2 (t ρ² + 1) / (t² ρ²) · log(sqrt(t ρ² + 1) / (2α)))``

    with ``m_t`` the sample mean and ``σ̂_t`` the sample standard deviation (divided by ``t``). The boundary is the
    Gaussian mixture's for standardized differences, scaled back by ``σ̂_t`` (the authors' form): so it is tightest
    at ``planned_pairs`` whatever the reward's units, and multiplying every value by ``k`` multiplies the interval
    by ``k``. With every value equal, σ̂ is 0 and so is the radius: the sequence says nothing finite about rare
    losses, which is why decisions on it wait for a minimum number of pairs.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("a confidence sequence needs at least one value")
    if not 0 < alpha < 0.5:
        raise ValueError(f"bad alpha {alpha}: expected a one-sided level in (0, 0.5)")
    mean, spread = float(x.mean()), float(x.std())
    radius = float(asymptotic_radius(np.asarray(float(x.size)), np.asarray(spread), alpha, planned_pairs))
    return Interval(x.size, mean, mean - radius, mean + radius)


def asymptotic_radius(pairs: np.ndarray, spread: np.ndarray, alpha: float, planned_pairs: int) -> np.ndarray:
    """:func:`asymptotic_cs`'s radius after ``pairs`` values of standard deviation ``spread`` (arrays: one radius
    per look, for the validity benchmark's many replications at once)."""
    rho2 = mixture_rho_squared(2 * alpha, planned_pairs)
    growth = pairs * rho2 + 1
    return spread * np.sqrt(2 * growth / (pairs**2 * rho2) * np.log(np.sqrt(growth) / (2 * alpha)))


def bounded_cs(
    values: Sequence[float] | np.ndarray, low: float, high: float, alpha: float, bet: str = "plug-in"
) -> Interval:
    """The betting confidence sequence for the mean of ``values``, each known to lie in [``low``, ``high``], at
    ``t = len(values)``: each side a one-sided (1 - α) bound valid at every ``t`` at once (finite-sample).

    :raises ValueError: for a value outside [low, high] (the guarantee would not hold).
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("a confidence sequence needs at least one value")
    if not high > low:
        raise ValueError(f"bad bounds [{low:g}, {high:g}]: expected low < high")
    outside = np.flatnonzero((x < low) | (x > high))
    if outside.size:
        raise ValueError(f"value {x[outside[0]]:g} (number {outside[0] + 1}) lies outside [{low:g}, {high:g}]")
    unit = (x - low) / (high - low)
    span = high - low
    return Interval(
        x.size,
        float(x.mean()),
        low + span * lower_bound(unit, alpha, bet=bet),
        low + span * upper_bound(unit, alpha, bet=bet),
    )
