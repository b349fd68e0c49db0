"""Does a certification hold the error rate it prints? Synthetic paired differences with a known mean, run through
:class:`~quarl_bench.statistics.certification.SequentialTest` (certify's own decision) look by look, many
replications at once. ``benchmarks/certify_validity.py`` prints every scenario; a test runs two short ones.

A scenario sits at the boundary (true mean exactly -δ: every "safe" is wrong) or at 0 (truly safe: every "unsafe"
is wrong). Differences are clipped to ±(hi - lo), as paired returns in [lo, hi] would be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quarl_bench.statistics.certification import SequentialTest

Sampler = Callable[[np.random.Generator, tuple[int, int], float], np.ndarray]


@dataclass(frozen=True)
class Scenario:
    """Paired differences of one shape: ``sample(rng, (reps, pairs), mean)`` draws them with the given true mean;
    ``delta`` is the tolerance, ``bounds`` the returns' range."""

    name: str
    sample: Sampler
    delta: float
    bounds: tuple[float, float]


@dataclass(frozen=True)
class Outcome:
    """What one scenario's replications decided: shares of safe / unsafe verdicts, and the median pairs taken by
    those that decided (None when none did)."""

    safe: float
    unsafe: float
    median_pairs: float | None
    replications: int


def _centred(draw: Callable[[np.random.Generator, tuple[int, int]], np.ndarray], span: float) -> Sampler:
    """A sampler that shifts ``draw``'s clipped values to a requested mean (the shift estimated once, on 400k)."""
    probe = np.clip(draw(np.random.default_rng(12345), (400, 1000)), -span, span).mean()

    def sample(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
        return np.clip(draw(rng, shape) - probe + mean, -span, span)

    return sample


def crashes(rate: float, low: float, high: float) -> Sampler:
    """Identical episodes (difference 0) but for a share ``rate`` that lose U[low, high]; a mean of 0 is reached by
    as many episodes gaining as losing (so ``mean`` is either 0 or -rate·E[loss])."""
    loss = (low + high) / 2

    def sample(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
        crash = rng.random(shape) < rate
        size = rng.uniform(low, high, shape)
        if mean < 0:  # at the boundary: -rate · E[loss] = mean by construction
            assert abs(mean + rate * loss) < 1e-9, "crash scenarios are defined at -rate·E[loss] or at 0"
            return np.where(crash, -size, 0.0)
        gain = rng.random(shape) < rate
        return np.where(crash, -size, 0.0) + np.where(gain, size, 0.0)

    return sample


def cartpole_failures(loss_low: float = 300.0, loss_high: float = 491.0) -> Sampler:
    """fp32 always scores 500; the quantized policy fails (returns 9-200) in some episodes, the share set by the
    mean (0: it never fails)."""

    def sample(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
        rate = -mean / ((loss_low + loss_high) / 2)
        return np.where(rng.random(shape) < rate, -rng.uniform(loss_low, loss_high, shape), 0.0)

    return sample


def ties(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
    """Discrete differences with many exact ties: {-100, -50, 0, 50, 100}, tilted to the mean."""
    values = np.array([-100.0, -50.0, 0.0, 50.0, 100.0])
    base = np.array([0.1, 0.15, 0.5, 0.15, 0.1])
    tilt = np.array([1.0, 0.5, 0.0, -0.5, -1.0])  # moves the mean by -250 per unit, keeping the total 1
    return rng.choice(values, size=shape, p=base + tilt * (-mean / 250))


def scenarios() -> list[Scenario]:
    """The benchmark's scenarios (returns in [0, 500] unless named: paired differences in ±500)."""
    cartpole = (0.0, 500.0)
    return [
        Scenario("Gaussian sd 20", _centred(lambda r, s: r.normal(0, 20, s), 500), 17.5, cartpole),
        Scenario("Gaussian sd 80", _centred(lambda r, s: r.normal(0, 80, s), 500), 17.5, cartpole),
        *[
            Scenario(f"{rate:.1%} crashes losing 100-500", crashes(rate, 100, 500), rate * 300, cartpole)
            for rate in (0.01, 0.02, 0.035, 0.05, 0.10)
        ],
        Scenario("3.5% crashes losing 500", crashes(0.035, 500, 500), 0.035 * 500, cartpole),
        Scenario("Student t(3), scale 30", _centred(lambda r, s: 30 * r.standard_t(3, s), 500), 17.5, cartpole),
        Scenario(
            "lognormal, heavy left tail", _centred(lambda r, s: -np.exp(r.normal(2.5, 1.2, s)), 500), 17.5, cartpole
        ),
        Scenario("CartPole-like failures (delta 24)", cartpole_failures(), 23.97, cartpole),
        Scenario("discrete ties {0, ±50, ±100}", ties, 10.0, cartpole),
    ]


def simulate(
    scenario: Scenario,
    test: SequentialTest,
    mean: float,
    replications: int,
    batch: int = 20,
    max_pairs: int = 1000,
    seed: int = 0,
) -> Outcome:
    """Run ``replications`` certifications of ``scenario`` at true mean ``mean`` through ``test``, a look after each
    ``batch`` pairs up to ``max_pairs``, each stopping at its first decision."""
    rng = np.random.default_rng(seed)
    d = scenario.sample(rng, (replications, max_pairs), mean)
    looks = np.arange(batch - 1, max_pairs, batch)
    codes = test.decide_looks(d, scenario.delta, looks)
    decided = codes != 0
    first = np.where(decided.any(axis=-1), decided.argmax(axis=-1), -1)
    final = np.where(first >= 0, codes[np.arange(replications), np.maximum(first, 0)], 0)
    pairs = (looks[first[first >= 0]] + 1).astype(float)
    return Outcome(
        float((final == 1).mean()),
        float((final == -1).mean()),
        float(np.median(pairs)) if pairs.size else None,
        replications,
    )
