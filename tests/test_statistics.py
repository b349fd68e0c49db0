"""Interval estimates on tiny hand-computed inputs (rliable's methods), the minimum safe bit width, normalisation."""

from __future__ import annotations

import numpy as np
import pytest

from quarl_bench.report.estimators import (
    iqm,
    minimum_safe_bits,
    normalized_scores,
    paired_difference_ci,
    performance_profile,
    probability_of_improvement,
    stratified_bootstrap_ci,
)
from quarl_bench.statistics.pairing import paired_rewards


def test_iqm_is_the_mean_of_the_middle_half() -> None:
    assert iqm([1, 2, 3, 4, 5, 6, 7, 8]) == 4.5  # 3, 4, 5, 6
    assert iqm([0, 0, 0, 0, 100, 100, 100, 100]) == 50.0  # 0, 0, 100, 100
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == 4.5  # order does not matter
    assert iqm([-1000, 1, 2, 3, 4, 5, 6, 10_000]) == 3.5  # outliers trimmed


def test_stratified_bootstrap_resamples_within_each_seed() -> None:
    # each resample of seed 0 is [0, 0] and of seed 1 is [10, 10]: an unstratified bootstrap would vary, this cannot
    assert stratified_bootstrap_ci([[0, 0], [10, 10]], np.mean) == (5.0, 5.0, 5.0)
    point, low, high = stratified_bootstrap_ci([[0, 10], [20, 30]], np.mean)
    assert point == 15.0 and 5.0 <= low < 15.0 < high <= 25.0  # bounded by the strata's extremes
    assert stratified_bootstrap_ci([[3.0, 3.0, 3.0]]) == (3.0, 3.0, 3.0)


def test_paired_difference_cancels_what_the_seeds_share() -> None:
    # seed 1 scores 10 more for both policies; the quantized one is exactly 1 better on every episode
    assert paired_difference_ci([[1, 1], [11, 11]], [[0, 0], [10, 10]]) == (1.0, 1.0, 1.0)
    diff, low, high = paired_difference_ci([[0, 2]], [[1, 1]])
    assert diff == 0.0 and low == -1.0 and high == 1.0  # means of resamples of [0, 2]: 0, 1 or 2
    with pytest.raises(ValueError, match="pair them by seed"):
        paired_difference_ci([[1]], [[1], [2]])


def test_paired_difference_of_a_constant_offset_on_noisy_rewards_is_a_few_hundredths_wide() -> None:
    rng = np.random.default_rng(0)
    reference = rng.normal(100.0, 40.0, size=100)  # episodes spread 40 apart
    quantized = reference + 0.5 + rng.normal(0.0, 0.05, size=100)  # each episode 0.5 better, give or take 0.05
    diff, low, high = paired_difference_ci([quantized], [reference])
    assert 0.48 < low < diff < high < 0.52  # unpaired, the two means' spread would make it about +-11 wide
    rewards, references = paired_rewards(
        [1.0, 2.0, 3.0], [[1, 0, 7], [0, 0, 5], [0, 1, 6]], [10.0, 20.0], [[0, 0, 5], [1, 0, 7]]
    )
    assert rewards.tolist() == [2.0, 1.0] and references.tolist() == [10.0, 20.0]  # matched by identity, not order
    with pytest.raises(ValueError, match="without episode identities"):
        paired_rewards([1.0], [], [1.0], [[0, 0, 1]])


def test_probability_of_improvement_counts_ties_half() -> None:
    assert probability_of_improvement([[1, 2]], [[1, 1]]) == 0.75  # (1 vs 1: 1/2) and (2 vs 1: 1), averaged
    assert probability_of_improvement([[5, 5]], [[5, 5]]) == 0.5  # the same policy
    assert probability_of_improvement([[2], [0]], [[1], [1]]) == 0.5  # seed 0: 1, seed 1: 0
    assert probability_of_improvement([[3, 4]], [[1, 2]]) == 1.0


def test_minimum_safe_bits_needs_every_wider_width_safe() -> None:
    lower = {8: -1.0, 6: -4.0, 4: -10.0, 2: -3.0}  # delta 5: 8 and 6 pass, 4 fails, 2 passes but 4 is above it
    assert minimum_safe_bits(lower, 5.0) == 6
    assert minimum_safe_bits(lower, 10.0) == 2  # every width within 10
    assert minimum_safe_bits({8: -10.0, 4: -1.0}, 5.0) is None  # the widest measured already falls short


def test_normalised_scores_and_performance_profile() -> None:
    assert list(normalized_scores([-100, 50, 200], random_reward=-100, fp32_reward=200)) == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="no normalisation"):
        normalized_scores([1.0], 3.0, 3.0)
    assert list(performance_profile([0.2, 0.6, 1.0], [0.0, 0.5, 1.0])) == [1.0, 2 / 3, 0.0]


def test_margin_is_correlated_with_reward_error_and_with_flips() -> None:
    import pandas as pd

    from quarl_bench.report.tables import spread_error_correlation

    # four agents: the narrower the margin, the more int8 flips; the error does not follow (a saturated task)
    table = pd.DataFrame(
        {
            "std": [0.2, 0.3, 0.4, 0.5],
            "range": [1.0, 2.0, 3.0, 4.0],
            "kurtosis": [0.0, 1.0, 5.0, 9.0],
            "margin_median": [8.0, 2.0, 0.5, 0.01],
            "E_int8 %": [0.0, 5.0, 0.0, 1.0],
            "int8 flips %": [0.1, 1.0, 20.0, 57.0],
        }
    )
    found = spread_error_correlation(table).set_index(["metric", "with"])
    assert found.loc[("margin_median", "int8 flips %"), "spearman_rho"] == pytest.approx(-1.0)
    assert found.loc[("margin_median", "E_int8 %"), "n"] == 4
    assert len(found) == 8  # 4 metrics x (E%, flips)
