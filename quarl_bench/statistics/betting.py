"""Betting confidence sequences for the mean of a variable in [0, 1] (Waudby-Smith & Ramdas, "Estimating means of
bounded random variables by betting", JRSS-B 2024; arXiv 2010.09686), one-sided.

For a candidate mean ``m`` the capital ``K⁺_t(m) = Π (1 + λ_i (x_i - m))`` is a nonnegative martingale when the mean
is ``m`` (a supermartingale when it is below) as long as each bet ``λ_i`` is chosen from ``x_1..x_{i-1}`` only and
``0 ≤ λ_i ≤ c/m`` (so no factor is negative). By Ville's inequality the capital ever reaching ``1/α`` has probability
at most ``α``: crossing rejects "the mean is ≤ m" at every look at once, with no burn-in and no asymptotics.
``K⁻_t(m) = Π (1 - λ_i (x_i - m))`` with ``λ_i ≤ c/(1 - m)`` rejects "the mean is ≥ m".

The bet is the paper's predictable plug-in (its eq. 26, with ``log(1/α)`` for one side):
``λ_t = sqrt(2 log(1/α) / (σ̂²_{t-1} t log(1 + t)))``, ``σ̂²_t = (1/4 + Σ_{i≤t} (x_i - μ̂_i)²) / (t + 1)``,
``μ̂_t = (1/2 + Σ_{i≤t} x_i) / (t + 1)``, truncated at ``c/m`` (or ``c/(1 - m)``).

**Hedged** (``bet="hedged"``, ``quarl-bench trials``' default): the capital is the average of two: the plug-in
one and one betting aGRAPA's growth-rate fraction (the paper's section 5.1: ``λ_t = (μ̂_{t-1} - m) / (σ̂²_{t-1} +
(μ̂_{t-1} - m)²)``, 0 when negative, truncated alike). An average of nonnegative martingales is one, so Ville's
inequality holds as before; it costs at most log 2 of log-capital where the plug-in bet is best (identical pairs:
~5% more pairs) and gains most where the plug-in bet shrinks too fast for a small mean gap with some spread (90%
of pairs alike at a margin of 0.05: ~0.6x the pairs).

Every function works along the last axis, so a simulation passes many replications at once; certify passes one.
"""

from __future__ import annotations

import math

import numpy as np

TRUNCATION = 0.9  # c: a loss of the whole range costs at most this share of the capital (the paper uses 1/2 or 3/4;
# closer to 1 bets harder on identical episodes, which is where quantized policies sit most of the time)
BISECTION_STEPS = 40
BETS = ("plug-in", "hedged")


def plug_in_bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """The predictable plug-in bet ``λ_t`` before truncation, for every ``t`` (from ``x_1..x_{t-1}`` only)."""
    x = np.asarray(x, dtype=float)
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mean = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    variance = (0.25 + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)
    previous = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), variance[..., :-1]], axis=-1)
    return np.sqrt(2 * math.log(1 / alpha) / (previous * t * np.log1p(t)))


def growth_rate_bets(x: np.ndarray, m: float, side: int) -> np.ndarray:
    """aGRAPA's bet ``λ_t`` before truncation for the side that grows when the mean is above (``side=+1``) or below
    ``m``, from ``x_1..x_{t-1}`` only (the plug-in's running mean and variance, their priors 1/2 and 1/4)."""
    x = np.asarray(x, dtype=float)
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mean = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    variance = (0.25 + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)
    start = np.ones(x.shape[:-1] + (1,))
    gap = side * (np.concatenate([0.5 * start, mean[..., :-1]], axis=-1) - m)
    spread = np.concatenate([0.25 * start, variance[..., :-1]], axis=-1)
    return np.maximum(gap / (spread + gap**2), 0.0)


def log_capital(
    x: np.ndarray,
    m: float,
    side: int,
    alpha: float,
    c: float = TRUNCATION,
    bets: np.ndarray | None = None,
    bet: str = "plug-in",
) -> np.ndarray:
    """``log K_t(m)`` for every ``t``: ``side=+1`` grows when the mean is above ``m`` (rejects mean ≤ m), ``side=-1``
    when it is below (rejects mean ≥ m). ``x`` must lie in [0, 1]; ``m`` in (0, 1). ``bets``: :func:`plug_in_bets`
    of ``x`` where the caller has them (they do not depend on ``m``)."""
    x = np.asarray(x, dtype=float)
    room = m if side > 0 else 1 - m  # how far x can fall against the bet
    if room < 0:  # a mean below 0 (above 1) is impossible for values in [0, 1]: rejected before any value
        return np.full_like(x, np.inf)
    if room == 0:  # a mean of exactly 0 (1): rejected by the first value above (below) it, with certainty
        return np.where(np.cumsum(side * (x - m) > 0, axis=-1) > 0, np.inf, 0.0)
    cap = c / room
    plug_in = np.cumsum(
        np.log1p(side * np.minimum(plug_in_bets(x, alpha) if bets is None else bets, cap) * (x - m)), -1
    )
    if bet == "plug-in":
        return plug_in
    growth = np.cumsum(np.log1p(side * np.minimum(growth_rate_bets(x, m, side), cap) * (x - m)), axis=-1)
    return np.logaddexp(plug_in, growth) - math.log(2)  # the log of the two capitals' average


def rejected(
    x: np.ndarray,
    m: float,
    side: int,
    alpha: float,
    c: float = TRUNCATION,
    bets: np.ndarray | None = None,
    bet: str = "plug-in",
) -> np.ndarray:
    """Whether ``m`` is rejected by step ``t`` (the capital reached ``1/α`` at some step ≤ t), for every ``t``."""
    return np.maximum.accumulate(log_capital(x, m, side, alpha, c, bets, bet), axis=-1) >= math.log(1 / alpha)


def lower_bound(x: np.ndarray, alpha: float, c: float = TRUNCATION, bet: str = "plug-in") -> float:
    """The one-sided (1 - α) lower confidence-sequence bound on the mean after all of ``x`` (a 1-d array): the
    smallest ``m`` not yet rejected at any look. Every ``K⁺`` factor falls as ``m`` grows, so bisection finds it."""
    x = np.asarray(x, dtype=float)
    if not x.size:
        return 0.0
    bets = plug_in_bets(x, alpha)  # the same for every m tried
    low, high = 0.0, 1.0
    if not rejected(x, 1e-12, +1, alpha, c, bets, bet)[-1]:
        return 0.0
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if rejected(x, middle, +1, alpha, c, bets, bet)[-1] else (low, middle)
    return low


def upper_bound(x: np.ndarray, alpha: float, c: float = TRUNCATION, bet: str = "plug-in") -> float:
    """The one-sided (1 - α) upper confidence-sequence bound on the mean of ``x`` (see :func:`lower_bound`)."""
    return 1.0 - lower_bound(1.0 - np.asarray(x, dtype=float), alpha, c, bet)
