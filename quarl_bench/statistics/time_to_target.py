"""Time to a target reward, per run and over seeds, so that a speed-up can carry a confidence interval.

- **A run's crossing** (:func:`crossing`): evaluations come at discrete clock readings (seconds, actor steps or
  learner updates). The target is crossed between the last evaluation below it and the first at or above it; the
  time is interpolated linearly in reward between the two (the bracket is kept beside it). A run that never reaches
  the target is **censored** at its last evaluation: it is known only to take longer, and it is kept, not dropped.
- **Over seeds** (:func:`median_time`): the Kaplan-Meier median, which reads censored runs as "longer than", and is
  undefined when half the runs or more never reached the target.
- **The speed-up** (:func:`speedup`): fp32's median time over the quantized one's, with a bootstrap interval over
  seeds (the fp32 and quantized runs of one seed resampled together: they share the seed). Where a resample's
  median is undefined, that side of the interval is unbounded. The verdict is "faster" or "slower" only when the
  interval excludes 1, else "undetermined" (also with fewer than two seeds, or no median).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CLOCKS = ("seconds", "actor_steps", "updates")
MIN_SEEDS = 2  # a ratio of one seed's times has no interval


@dataclass(frozen=True)
class Crossing:
    """When one run reached the target: ``time`` (interpolated), or its last clock reading when ``reached`` is
    False (censored); ``bracket`` the readings of the evaluations either side of the crossing."""

    time: float
    reached: bool
    bracket: tuple[float, float]


def crossing(curve: Sequence[dict[str, Any]], target: float, clock: str = "seconds") -> Crossing:
    """The run's crossing of ``target`` on ``clock``, from its evaluations (each a dict with ``reward`` and the
    clock's reading).

    :raises ValueError: for an empty curve or a clock it does not carry.
    """
    if not curve:
        raise ValueError("a curve needs at least one evaluation")
    if clock not in curve[0]:
        raise ValueError(f"bad clock {clock!r}: expected one of {', '.join(c for c in CLOCKS if c in curve[0])}")
    points = sorted(((float(p[clock]), float(p["reward"])) for p in curve), key=lambda point: point[0])
    for index, (at, reward) in enumerate(points):
        if reward >= target:
            if index == 0:
                return Crossing(at, True, (at, at))
            before, below = points[index - 1]
            share = (target - below) / (reward - below)  # reward > target > below here
            return Crossing(before + share * (at - before), True, (before, at))
    last = points[-1][0]
    return Crossing(last, False, (last, math.inf))


def median_time(times: Sequence[float], reached: Sequence[bool]) -> float | None:
    """The Kaplan-Meier median of the times, censored where not ``reached``; None when the survival curve never
    falls to one half (half the runs or more never reached the target before the others' times)."""
    order = np.argsort(np.asarray(times, dtype=float), kind="stable")
    t = np.asarray(times, dtype=float)[order]
    event = np.asarray(reached, dtype=bool)[order]
    surviving, at_risk = 1.0, len(t)
    for time, happened in zip(t, event, strict=True):
        if happened:
            surviving *= 1 - 1 / at_risk
            if surviving <= 0.5 + 1e-12:
                return float(time)
        at_risk -= 1
    return None


@dataclass(frozen=True)
class SpeedUp:
    """fp32's median time to target over the quantized one's, with its bootstrap interval and verdict."""

    estimate: float | None
    low: float
    high: float
    verdict: str  # faster, slower or undetermined
    seeds: int
    reached: tuple[int, int]  # runs that reached the target: (fp32, quantized)
    why: str = ""


def speedup(
    fp32: Sequence[Crossing], quantized: Sequence[Crossing], level: float = 0.95, resamples: int = 4000, seed: int = 0
) -> SpeedUp:
    """The speed-up over seeds; ``fp32[i]`` and ``quantized[i]`` are seed i's runs."""
    n = len(fp32)
    reached = (sum(c.reached for c in fp32), sum(c.reached for c in quantized))
    if n != len(quantized):
        raise ValueError("fp32 and quantized runs must pair seed by seed")
    base, fast = _median(fp32), _median(quantized)
    estimate = base / fast if base is not None and fast is not None and fast > 0 else None
    if n < MIN_SEEDS:
        return SpeedUp(estimate, math.nan, math.nan, "undetermined", n, reached, f"{n} seed: no interval")
    if estimate is None:
        why = (
            "half the fp32 runs or more never reached the target"
            if base is None
            else ("half the quantized runs or more never reached the target")
        )
        return SpeedUp(None, math.nan, math.nan, "undetermined", n, reached, why)
    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(resamples):
        picked = rng.integers(0, n, n)
        b, f = _median([fp32[i] for i in picked]), _median([quantized[i] for i in picked])
        # an undefined median is a time longer than every run's: fp32's makes the ratio unbounded, the quantized 0
        ratios.append(math.inf if b is None else 0.0 if f is None else b / f if f > 0 else math.inf)
    tail = (1 - level) / 2
    low, high = (float(np.quantile(ratios, q)) for q in (tail, 1 - tail))
    verdict = "faster" if low > 1 else "slower" if high < 1 else "undetermined"
    why = "" if verdict != "undetermined" else f"the {level:.0%} interval [{low:.2f}, {high:.2f}] holds 1"
    return SpeedUp(estimate, low, high, verdict, n, reached, why)


def _median(runs: Sequence[Crossing]) -> float | None:
    return median_time([c.time for c in runs], [c.reached for c in runs])
