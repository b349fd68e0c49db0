"""The asymptotic confidence sequence of Waudby-Smith, Arnold, Wu and Ramdas ("Time-uniform central limit theory
and asymptotic confidence sequences", Annals of Statistics 2024; arXiv 2103.06476), Gaussian-mixture boundary.

Why this one: it needs no bounds on the rewards. A bounded sequence (empirical Bernstein, betting) needs a known
range for each paired difference, and an env's return range is either unknown (MuJoCo, Atari) or so wide (LunarLander:
several hundred) that the sequence would take thousands of episodes to shrink below a 5% tolerance. The price is
that coverage is asymptotic: it holds as the number of pairs grows, for i.i.d. (or martingale) differences with a
finite variance. Paired episodes are i.i.d. here: each pair is one reset seed drawn independently of the others.

Written from the closed form because the authors' ``confseq`` does not build on Python 3.11 and ``expectation``
needs 3.12; tests hold it against values worked out by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """The sequence's interval after ``pairs`` observations around their ``mean``."""

    pairs: int
    mean: float
    lower: float
    upper: float


def mixture_rho_squared(alpha: float, planned_pairs: int) -> float:
    """The mixing variance ρ² that makes the boundary tightest at ``planned_pairs`` (the paper's t*):
    ``(-2 log α + log(-2 log α + 1)) / t*``."""
    log_term = -2 * math.log(alpha)
    return (log_term + math.log(log_term + 1)) / planned_pairs


def asymptotic_cs(values: Sequence[float] | np.ndarray, alpha: float, planned_pairs: int = 100) -> Interval:
    """The two-sided (1 - α) asymptotic confidence sequence for the mean of ``values``, at ``t = len(values)``:

    ``m_t ± sqrt(2 (t v_t ρ² + 1) / (t² ρ²) · log(sqrt(t v_t ρ² + 1) / α))``

    with ``m_t`` the sample mean and ``v_t`` the sample variance (divided by ``t``, as in the paper). It contains the
    true mean at every ``t`` at once with probability about ``1 - α``, so it may be read after every batch.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("a confidence sequence needs at least one value")
    if not 0 < alpha < 1:
        raise ValueError(f"bad alpha {alpha}: expected a level in (0, 1)")
    t = x.size
    mean, variance = float(x.mean()), float(x.var())
    rho2 = mixture_rho_squared(alpha, planned_pairs)
    spread = t * variance * rho2 + 1
    radius = math.sqrt(2 * spread / (t**2 * rho2) * math.log(math.sqrt(spread) / alpha))
    return Interval(t, mean, mean - radius, mean + radius)
