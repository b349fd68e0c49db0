"""The finite-sample certification rule: betting sequences on values worked out by hand, the scale-free reading,
δ's bounds, the catastrophe bound, and a short run of the validity benchmark (the error it prints, held)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quarl_bench.statistics.betting import log_capital, plug_in_bets, rejected
from quarl_bench.statistics.certification import (
    SequentialTest,
    minimum_episodes,
    rate_bound,
    split_alpha,
    tolerance_bounds,
)
from quarl_bench.statistics.validity import crashes, scenarios, simulate


def test_the_first_bet_and_capital_worked_by_hand() -> None:
    # λ_1 = sqrt(2 log 20 / (1/4 · 1 · log 2)) = sqrt(5.991465 / 0.173287) = 5.8801
    assert plug_in_bets(np.array([1.0]), 0.05)[0] == pytest.approx(5.8801, abs=1e-4)
    # truncated at c/m = 0.9/0.5 = 1.8: log(1 + 1.8 · (1 - 0.5)) = log 1.9
    assert log_capital(np.array([1.0]), 0.5, +1, 0.05)[0] == pytest.approx(math.log(1.9))
    # against the mean: a value of 0 costs the same bet, log(1 - 1.8 · 0.5) = log 0.1
    assert log_capital(np.array([0.0]), 0.5, +1, 0.05)[0] == pytest.approx(math.log(0.1))


def test_identical_episodes_reject_a_lower_mean_at_the_step_worked_by_hand() -> None:
    # every x = 1/2 (difference 0), m = 0.4: the plug-in bet sqrt(23.966 / log(1 + t)) stays above the cap
    # c/m = 2.25 while t <= 112, so each step multiplies the capital by 1.225; log 20 / log 1.225 = 14.76
    path = rejected(np.full(30, 0.5), 0.4, +1, 0.05)
    assert not path[13] and path[14]  # rejected at t = 15, not before
    assert not rejected(np.full(30, 0.5), 0.4, -1, 0.05).any()  # the mean is above 0.4: never "below"


def test_the_fewest_loss_free_episodes_any_valid_test_needs() -> None:
    # dqn CartPole: δ 23.97 of a 500 range: (1 - 0.04794)^t <= 0.05 from t = 61 (certification.md)
    assert minimum_episodes(23.97, 500, 0.05) == 61
    assert minimum_episodes(600, 500, 0.05) == 1


def test_identical_policies_are_safe_within_100_pairs_on_cartpole_bounds() -> None:
    test = SequentialTest("finite-sample", split_alpha(0.05, 1, estimated_delta=False)[0], (0.0, 500.0))
    looks = np.arange(19, 200, 20)
    codes = test.decide_looks(np.zeros(200), 23.97, looks)
    first = looks[np.flatnonzero(codes)[0]] + 1
    assert codes[np.flatnonzero(codes)[0]] == 1 and 61 <= first <= 100
    # one crash of -500 in the first batch delays it, it does not make it unsafe
    d = np.zeros(200)
    d[3] = -500
    assert test.decide(d[:100], 23.97) is None and test.decide(d, 23.97) == "safe"
    # a policy losing 400 in every episode is unsafe at the first look
    assert test.decide(np.full(20, -400.0), 23.97) == "unsafe"


@pytest.mark.parametrize("guarantee", ["finite-sample", "asymptotic"])
def test_verdicts_do_not_depend_on_the_rewards_units(guarantee: str) -> None:
    rng = np.random.default_rng(3)
    looks = np.arange(19, 600, 20)
    for mean in (-40.0, -17.5, 0.0, 10.0):
        d = np.clip(rng.normal(mean, 60, 600), -500, 500)
        small = SequentialTest(guarantee, 0.05, (0.0, 500.0) if guarantee == "finite-sample" else None)
        large = SequentialTest(guarantee, 0.05, (0.0, 500_000.0) if guarantee == "finite-sample" else None)
        assert (small.decide_looks(d, 17.5, looks) == large.decide_looks(d * 1000, 17_500.0, looks)).all()


def test_all_zero_asymptotic_differences_wait_for_the_minimum_pairs() -> None:
    test = SequentialTest("asymptotic", 0.05, min_pairs=100)
    assert test.decide(np.zeros(80), 20.0) is None and test.decide(np.zeros(100), 20.0) == "safe"


def test_a_catastrophe_rate_bound_and_gate() -> None:
    # no catastrophe in 100 pairs: the bound sits above the 3% "rule of three" and below 5%
    assert 0.03 < rate_bound(np.zeros(100), 0.05).upper < 0.05
    test = SequentialTest("finite-sample", 0.05, (0.0, 500.0))
    d = np.zeros(200)
    d[::10] = -10.0  # a loss of 10 in one episode in ten: the mean (-1) is safe against δ = 24
    counted = (d < -5).astype(float)  # a catastrophe threshold of 5: 10% of pairs
    assert test.decide(d, 24.0) == "safe"
    assert test.decide(d, 24.0, counted, max_rate=0.02) == "unsafe"  # 10% certified above 2%


def test_delta_bounds_hold_the_tolerance_from_below() -> None:
    test = SequentialTest("finite-sample", 0.01, (0.0, 500.0))
    low, high = tolerance_bounds(5, np.full(100, 500.0), np.full(100, 20.0), test)
    assert low < 0.05 * (500 - 20) < high
    assert low > 0.8 * 0.05 * 480  # 100 episodes of each pin δ within 20%
    assert split_alpha(0.05, 2, estimated_delta=True) == pytest.approx((0.02, 0.005))


def test_finite_sample_error_stays_within_alpha_on_rare_crashes() -> None:
    # the validity benchmark, short: 3.5% crashes of 100-500 and the CartPole-like failures, at the boundary
    replications = 400
    limit = 0.05 + 3 * math.sqrt(0.05 * 0.95 / replications)
    cases = [s for s in scenarios() if s.name.startswith("3.5% crashes losing 100") or "CartPole" in s.name]
    assert len(cases) == 2
    for scenario in cases:
        finite = simulate(scenario, SequentialTest("finite-sample", 0.05, scenario.bounds), -scenario.delta, 400)
        asymptotic = simulate(scenario, SequentialTest("asymptotic", 0.05, min_pairs=100), -scenario.delta, 400)
        assert finite.safe <= limit, scenario.name
        assert asymptotic.safe > limit, scenario.name  # what the asymptotic label warns of


def test_a_crash_sampler_sits_at_its_boundary() -> None:
    d = crashes(0.05, 100, 500)(np.random.default_rng(0), (200, 1000), -15.0)
    assert d.mean() == pytest.approx(-15.0, abs=0.6) and (d == 0).mean() == pytest.approx(0.95, abs=0.01)


def test_equivalence_within_delta_low_and_difference_beyond_delta_high() -> None:
    test = SequentialTest("finite-sample", 0.05, (0.0, 500.0))
    assert test.equivalence(np.zeros(200), (24.0, 30.0)) == "equivalent"
    assert test.equivalence(np.zeros(40), (24.0, 30.0)) is None  # 40 identical pairs: below the floor
    assert test.equivalence(np.full(40, 300.0), (24.0, 30.0)) == "different"  # better by 300: not equivalent either


def test_the_hedged_bet_holds_alpha_and_spends_fewer_pairs_on_a_small_gap_with_spread() -> None:
    """Success pairs alike 90% of the time, margin 0.05 (certify's margin question, paired): the hedged bet decides
    "safe" in fewer than 0.75x the plug-in bet's pairs; at the null (the candidate 0.05 worse) it errs at most α."""
    from quarl_bench.statistics.certification import SequentialTest

    rng = np.random.default_rng(3)

    def pairs(candidate_only: float, reference_only: float, rows: int) -> np.ndarray:
        u = rng.random((rows, 1500))
        return np.where(u < candidate_only, 1.0, np.where(u < candidate_only + reference_only, -1.0, 0.0))

    spent = {}
    for bet in ("plug-in", "hedged"):
        test = SequentialTest("finite-sample", 0.05, (0.0, 1.0), bet=bet)
        codes = test.decide_looks(pairs(0.05, 0.05, 300), 0.05, np.arange(1500))
        spent[bet] = np.where((codes != 0).any(axis=1), (codes != 0).argmax(axis=1) + 1, 1500).mean()
    assert spent["hedged"] < 0.75 * spent["plug-in"]
    test = SequentialTest("finite-sample", 0.05, (0.0, 1.0), bet="hedged")
    null = test.decide_looks(pairs(0.025, 0.075, 2000), 0.05, np.array([1499]))[:, 0]
    assert (null == 1).mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)
