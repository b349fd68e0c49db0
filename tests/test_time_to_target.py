"""Time to a target reward: a run's crossing interpolated between the evaluations either side, runs that never
reach it kept as censored, the Kaplan-Meier median over seeds, and a speed-up whose interval decides its verdict."""

from __future__ import annotations

import math

import pytest

from quarl_bench.statistics.time_to_target import Crossing, crossing, median_time, speedup


def curve(*points: tuple[float, float]) -> list[dict[str, float]]:
    return [{"seconds": s, "actor_steps": 100 * s, "reward": r} for s, r in points]


def test_a_crossing_is_interpolated_between_the_evaluations_either_side_and_a_miss_is_censored() -> None:
    # 100 at 10 s, 300 at 20 s: 200 is crossed half-way, at 15 s (actor steps: 1500)
    found = crossing(curve((0, 10), (10, 100), (20, 300), (30, 150)), 200)
    assert found == Crossing(15.0, True, (10.0, 20.0))
    assert crossing(curve((0, 10), (10, 100), (20, 300)), 200, "actor_steps").time == 1500.0
    assert crossing(curve((0, 250)), 200) == Crossing(0.0, True, (0.0, 0.0))
    missed = crossing(curve((0, 10), (10, 150), (40, 190)), 200)
    assert missed.time == 40.0 and not missed.reached and missed.bracket == (40.0, math.inf)
    with pytest.raises(ValueError, match="bad clock 'updates'"):
        crossing(curve((0, 10)), 200, "updates")


def test_the_kaplan_meier_median_reads_censored_runs_as_longer() -> None:
    assert median_time([10, 20, 30, 40, 50], [True] * 5) == 30  # no censoring: the ordinary median
    # two runs stopped at 12 and 14 s short of the target: S is 0.8 after 10 s, and 0.8 x (1 - 1/2) at 50 s, so the
    # median is 50 s (reading the stopped runs as reached would say 14 s)
    assert median_time([10, 12, 14, 50, 60], [True, False, False, True, True]) == 50
    assert median_time([10, 20, 30], [True, False, False]) is None  # two of three never reached it


def test_a_speed_up_is_decided_only_when_its_interval_excludes_1() -> None:
    fast = [Crossing(t, True, (t, t)) for t in (10, 11, 12, 10.5, 11.5)]
    slow = [Crossing(t, True, (t, t)) for t in (30, 33, 36, 31, 34)]
    found = speedup(slow, fast)
    assert found.verdict == "faster" and found.estimate == pytest.approx(33 / 11) and found.low > 2
    noisy = [Crossing(t, True, (t, t)) for t in (5, 40, 12, 35, 20)]
    assert speedup(noisy, [Crossing(t, True, (t, t)) for t in (30, 8, 25, 14, 18)]).verdict == "undetermined"
    censored = [Crossing(60.0, False, (60.0, math.inf))] * 3 + fast[:2]
    found = speedup(censored, fast)  # fp32 mostly never reached it: no median, no speed-up claimed
    assert found.verdict == "undetermined" and found.estimate is None and "fp32 runs" in found.why
    assert speedup(slow[:1], fast[:1]).verdict == "undetermined"  # one seed: no interval
