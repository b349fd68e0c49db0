"""How many trials certify's sequential test spends on success rates, simulated on its own decision
(:meth:`~quarl_bench.statistics.certification.SequentialTest.decide_looks`, finite-sample on [0, 1] as ``certify
--outcome success`` builds it), read after every trial as a robot evaluator would, for the benchmarks' comparisons
with STEP's protocol and with Barnard's fixed-n test (``benchmarks/trial_counts.py``).

- **Unpaired** (``certify --unpaired``; two policies on independent trials): the i-th trials of the two policies
  make a pair whose difference has the difference of the rates as its mean.
- **Paired** (certify's default: both policies on the same seeded episode): a pair is concordant (both succeed or
  both fail: difference 0) or discordant (±1); only discordant pairs move the capital.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quarl_bench.statistics.certification import SequentialTest

Draw = Callable[[np.random.Generator, int, int], np.ndarray]  # (rng, sequences, trials) -> differences
CHUNK_VALUES = 4_000_000  # sequences simulated per pass: (sequences x trials) values, bounded for memory


@dataclass(frozen=True)
class Stopping:
    """What a sequential test did on many simulated sequences: the share that ended on each side by the cap, and
    the trials (pairs) spent per sequence (the cap for those that never decided)."""

    above: float  # the lower bound crossed the threshold (certify's "safe"; at δ = 0, "better")
    below: float  # the upper bound crossed it (certify's "unsafe"; at δ = 0, "worse")
    mean_trials: float
    median_trials: float


def success_test(alpha: float) -> SequentialTest:
    """The test ``certify --outcome success`` runs at one-sided level ``alpha`` (a success lies in [0, 1])."""
    return SequentialTest("finite-sample", alpha, (0.0, 1.0))


def stopping(differences: np.ndarray, test: SequentialTest, delta: float) -> Stopping:
    """Read each row of ``differences`` (sequences x trials) after every trial, stopping at the first decision."""
    at = np.arange(differences.shape[-1])
    codes = test.decide_looks(differences, delta, at)
    decided = codes != 0
    first = np.where(decided.any(axis=-1), decided.argmax(axis=-1), differences.shape[-1] - 1)
    final = codes[np.arange(len(codes)), first]
    trials = first + 1
    return Stopping(
        float(np.mean(final == 1)), float(np.mean(final == -1)), float(trials.mean()), float(np.median(trials))
    )


def simulate(draw: Draw, sequences: int, trials: int, test: SequentialTest, delta: float, seed: int = 0) -> Stopping:
    """:func:`stopping` over ``sequences`` rows of ``draw(rng, rows, trials)``, in passes bounded by memory."""
    rng = np.random.default_rng(seed)
    rows = max(1, CHUNK_VALUES // trials)
    parts = []
    for start in range(0, sequences, rows):
        count = min(rows, sequences - start)
        parts.append((count, stopping(draw(rng, count, trials), test, delta)))
    weights = np.array([count for count, _ in parts], dtype=float) / sequences
    return Stopping(
        float(sum(w * p.above for w, (_, p) in zip(weights, parts, strict=True))),
        float(sum(w * p.below for w, (_, p) in zip(weights, parts, strict=True))),
        float(sum(w * p.mean_trials for w, (_, p) in zip(weights, parts, strict=True))),
        float(np.median([p.median_trials for _, p in parts])),
    )


def unpaired(rate_a: float, rate_b: float) -> Draw:
    """Independent trials: a's success minus b's, each its own Bernoulli draw."""

    def draw(rng: np.random.Generator, rows: int, trials: int) -> np.ndarray:
        a = rng.random((rows, trials)) < rate_a
        b = rng.random((rows, trials)) < rate_b
        return a.astype(float) - b.astype(float)

    return draw


def paired(a_only: float, b_only: float) -> Draw:
    """Paired trials: +1 with probability ``a_only`` (a succeeds, b fails), -1 with ``b_only``, else 0."""

    def draw(rng: np.random.Generator, rows: int, trials: int) -> np.ndarray:
        u = rng.random((rows, trials))
        return np.where(u < a_only, 1.0, np.where(u < a_only + b_only, -1.0, 0.0))

    return draw
