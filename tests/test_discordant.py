"""The finite-horizon test of two success rates on their discordant pairs: exact validity over the cap, the
decisions a user can check by hand, its plan against simulated campaigns, and ``trials --epsilon 0``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from quarl_bench.api.trials import TrialSettings, decide, read_csv
from quarl_bench.errors import QuarlError
from quarl_bench.statistics.discordant import DiscordantPairTest

SETTINGS = ("--reference", "fp32", "--candidate", "int8")


@pytest.mark.parametrize(("design", "cap"), [("unpaired", 500), ("paired", 500), ("unpaired", 60)])
def test_the_worst_null_s_error_is_alpha_spent_nearly_whole(design: str, cap: int) -> None:
    test = DiscordantPairTest(0.05, cap, design)
    assert 0.04 < test.worst_null_error() <= 0.05


def test_a_streak_of_seven_candidate_only_wins_decides_better_and_six_do_not() -> None:
    """At α = 0.05 and a cap of 500 pairs, seven pairs won by the candidate alone (each 1/2 under equal rates:
    1/128 together) decide "better"; concordant pairs between them change nothing; six wins and one loss do not."""
    test = DiscordantPairTest(0.05, 500, "unpaired")
    streak = np.array([1, 0, 1, 1, 0, 0, 1, 1, 1, 1], dtype=float)
    codes = test.decide_looks(streak, np.arange(len(streak)))
    assert codes[-1] == 1 and not codes[:-1].any()
    assert test.boundary(7) == 7 and test.boundary(6) is None
    assert not test.decide_looks(np.array([1.0] * 6 + [-1.0]), np.arange(7)).any()
    assert test.decide_looks(-streak, np.array([len(streak) - 1]))[0] == -1  # the mirror image: "worse"


def test_the_exact_plan_matches_simulated_campaigns_of_the_decision_itself() -> None:
    """Rates 0.45 and 0.55, unpaired, cap 500 (STEP's hardest pair): the exact P(better) and mean pairs are those of
    4,000 campaigns read pair by pair through decide_looks; under equal rates of 0.5 the error is at most α."""
    test = DiscordantPairTest(0.05, 500, "unpaired")
    plan = test.operating(0.55 * 0.55, 0.45 * 0.45)  # candidate alone: 0.55 x (1 - 0.45); reference alone
    rng = np.random.default_rng(0)
    d = (rng.random((4000, 500)) < 0.55).astype(float) - (rng.random((4000, 500)) < 0.45).astype(float)
    codes = test.decide_looks(d, np.arange(500))
    first = np.where((codes != 0).any(axis=1), (codes != 0).argmax(axis=1) + 1, 500)
    assert abs((codes[:, -1] == 1).mean() - plan.better) < 3 * np.sqrt(0.1 * 0.9 / 4000)
    assert abs(first.mean() - plan.mean_pairs) < 3 * first.std() / np.sqrt(4000)
    assert plan.better >= 0.90  # STEP's power on this pair is 0.904 (shared table)
    null = (rng.random((20000, 500)) < 0.5).astype(float) - (rng.random((20000, 500)) < 0.5).astype(float)
    assert (test.decide_looks(null, np.array([499]))[:, 0] == 1).mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 20000)


def test_trials_at_epsilon_zero_decide_on_the_walk_and_say_so(cli, tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("policy,outcome\n" + "fp32,0\nint8,1\nfp32,1\nint8,1\n" * 8)
    code, out, err = cli("trials", "decide", path, *SETTINGS, "--design", "unpaired", "--epsilon", "0", "--json")
    assert code == 0, err
    verdict = json.loads(out)["verdict"]
    assert verdict["verdict"] == "safe" and verdict["test"] == "finite-horizon"
    assert (verdict["walk"], verdict["discordant_pairs"], verdict["pairs"]) == (7, 7, 13)
    assert verdict["lower"] is None and verdict["interval"].startswith("none")
    code, out, _ = cli("trials", "decide", path, *SETTINGS, "--design", "unpaired", "--epsilon", "0")
    assert "+7 of 7 discordant pairs, deciding at ±7" in " ".join(out.split())
    code, _, err = cli("trials", "decide", path, *SETTINGS, "--epsilon", "0.05", "--test", "finite-horizon")
    assert (
        code == 2
        and "--test hedged or plug-in take any outcome and margin" in err
        and len(err.strip().splitlines()) == 1
    )


def test_a_campaign_started_before_the_test_setting_keeps_certify_s_bet(tmp_path: Path) -> None:
    from quarl_bench.api.trials import Campaign

    campaign = tmp_path / "old.jsonl"
    header = {"reference": "fp32", "candidate": "int8", "design": "paired", "outcome": "success"}
    header |= {"bounds": [0.0, 1.0], "epsilon": 0.1, "confidence": 0.95, "max_trials": 500}
    campaign.write_text(json.dumps({"campaign": header, "version": 1}) + "\n")
    assert Campaign.open(campaign).settings.test == "plug-in"
    assert TrialSettings("fp32", "int8", epsilon=0.1).test == "hedged"
    with pytest.raises(QuarlError, match="bad epsilon -0.1"):
        TrialSettings("fp32", "int8", epsilon=-0.1)
    settings = TrialSettings("fp32", "int8", epsilon=0.0)
    assert settings.test == "finite-horizon"
    assert decide(settings, read_csv(_empty(tmp_path), settings)).verdict.verdict == "undetermined"


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty.csv"
    path.write_text("trial,policy,outcome\n")
    return path
