"""Barnard's fixed-n regions against scipy's test, and the trial-count benchmark's simulation of certify's own
decision: valid at the null, and, paired, far below Barnard's fixed n when most pairs agree."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import barnard_exact

from quarl_bench.statistics.barnard import FixedTrials, p_values, power
from quarl_bench.statistics.trial_counts import paired, simulate, success_test, unpaired


@pytest.mark.parametrize("n", [8, 25, 40])
def test_barnard_p_values_of_every_table_are_scipy_s(n: int) -> None:
    found = p_values(n)
    rng = np.random.default_rng(n)
    for a, b in rng.integers(0, n + 1, size=(12, 2)):
        expected = barnard_exact([[a, b], [n - a, n - b]], alternative="greater").pvalue
        assert found[a, b] == pytest.approx(expected, abs=1e-3), (a, b)


def test_barnard_s_region_holds_its_level_and_has_the_power_of_its_tables() -> None:
    region = p_values(30) <= 0.05
    assert region[30, 0] and not region[15, 15] and not region[0, 30]
    assert max(power(region, rate, rate) for rate in np.linspace(0.05, 0.95, 19)) <= 0.05
    assert power(region, 0.9, 0.3) > 0.95
    n, how = FixedTrials(0.05, [10, 20, 30, 40]).trials_for(0.9, 0.3, 0.95)
    assert how == "exact" and n in (20, 30)  # 0.9 against 0.3 at 95% power: a few dozen trials per policy
    fixed = FixedTrials(0.05, [])
    exact, how = fixed.fewest(0.9, 0.3, 0.95, 60)  # no ladder: the fewest n itself
    assert how == "exact" and 10 < exact <= n
    assert power(fixed.region(exact), 0.9, 0.3) >= 0.95 > power(fixed.region(exact - 1), 0.9, 0.3)


def test_certify_s_success_test_holds_alpha_at_the_null_and_pairing_saves_trials() -> None:
    test = success_test(0.05)
    null = simulate(unpaired(0.5, 0.5), 2000, 200, test, 0.0)
    assert null.above <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)  # a wrong "better" at most α (plus noise)
    # 95% of pairs agree, every discordant one against the quantized copy: 0.8 against 0.75
    found = simulate(paired(0.0, 0.05), 500, 2000, test, 0.0)
    assert found.below > 0.99 and found.mean_trials < 200
    n, _ = FixedTrials(0.05, [100, 200]).trials_for(0.8, 0.75, 0.99)
    assert n > 10 * found.mean_trials  # Barnard's unpaired test at the same power: thousands of trials
