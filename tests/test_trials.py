"""``quarl-bench trials``: outcomes recorded outside quarl-bench (a robot's trials), decided by certify's test."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quarl_bench.api.trials import Campaign, TrialSettings, checked_trial, decide, read_csv
from quarl_bench.errors import QuarlError
from quarl_bench.statistics.certification import SequentialTest

SETTINGS = ("--reference", "fp32", "--candidate", "int8")


def recorded(path: Path, pairs: int, candidate_rate: float, agreement: float, seed: int = 1) -> Path:
    """A CSV of ``pairs`` paired trials: fp32 succeeds at 0.9, the candidate alike on ``agreement`` of them."""
    rng = np.random.default_rng(seed)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["trial", "policy", "outcome"])
        for trial in range(pairs):
            reference = rng.random() < 0.9
            candidate = reference if rng.random() < agreement else rng.random() < candidate_rate
            writer.writerow([f"t{trial}", "fp32", int(reference)])
            writer.writerow([f"t{trial}", "int8", int(candidate)])
    return path


def test_a_recorded_campaign_is_decided_from_its_csv_in_under_a_second(tmp_path: Path) -> None:
    settings = TrialSettings("fp32", "int8", epsilon=0.1)
    trials = read_csv(recorded(tmp_path / "runs.csv", 200, 0.9, 0.97), settings)
    found = decide(settings, trials)  # 2 x 200 trials
    assert found.verdict.verdict == "safe" and not found.going_on
    # the pairs it read are the first ones, in recorded order, and the decision is the test's own on them
    d = np.array([c - r for c, r in _pairs(trials)])[: found.verdict.episodes]
    test = SequentialTest("finite-sample", settings.alpha, (0.0, 1.0), bet="hedged")  # trials' default bet
    assert settings.test == "hedged" and test.decide(d, 0.1) == "safe" and test.decide(d[:-1], 0.1) is None
    worse = decide(settings, read_csv(recorded(tmp_path / "worse.csv", 200, 0.4, 0.5), settings))
    assert worse.verdict.verdict == "unsafe"


def _pairs(trials: list) -> list[tuple[float, float]]:
    by_trial: dict[str, dict[str, float]] = {}
    for trial in trials:
        by_trial.setdefault(trial.trial, {})[trial.policy] = trial.outcome
    return [(played["int8"], played["fp32"]) for played in by_trial.values()]


def test_unpaired_trials_difference_the_i_th_of_each_policy(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("policy,outcome\n" + "fp32,1\nint8,1\n" * 60 + "fp32,1\n")
    settings = TrialSettings("fp32", "int8", design="unpaired", epsilon=0.2)
    found = decide(settings, read_csv(path, settings))
    assert found.verdict.verdict == "safe" and found.verdict.evidence["design"] == "unpaired"


def test_a_campaign_says_what_to_run_next_and_refuses_bad_input_writing_nothing(cli, tmp_path: Path) -> None:
    campaign = tmp_path / "campaign.jsonl"
    code, out, err = cli("trials", "start", campaign, *SETTINGS, "--epsilon", "0.2", "--json")
    assert code == 0, err and json.loads(out)["next"] == "fp32"
    code, out, _ = cli("trials", "add", campaign, "fp32", "1", "t1", "--json")
    assert code == 0 and json.loads(out)["next"] == "int8"  # the pair t1 waits for the candidate
    before = campaign.read_text()
    for args, says in (
        (("add", campaign, "fp32", "1", "t1"), "played it already"),
        (("add", campaign, "int8", "2", "t1"), "a success in [0, 1]"),
        (("add", campaign, "int8", "0.5", "t1"), "a success is 0 or 1"),
        (("add", campaign, "int9", "1", "t1"), "expected 'fp32' (reference) or 'int8' (candidate)"),
        (("add", campaign, "int8", "1"), "needs each trial's id"),
        (("add", campaign, "int8", "1", "t1", "--epsilon", "0.1"), "keeps the settings it was started with"),
        (("start", campaign, *SETTINGS, "--epsilon", "0.1"), "was started with 0.2"),
    ):
        code, _, err = cli("trials", *args)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (args, err)
        assert campaign.read_text() == before  # nothing added
    code, out, _ = cli("trials", "status", campaign, "--json")
    assert json.loads(out)["trials"] == 1


def test_a_live_campaign_killed_mid_way_resumes_with_no_trial_lost_or_counted_twice(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign.jsonl"
    settings = TrialSettings("fp32", "int8", epsilon=0.1, max_trials=300)
    Campaign.start(campaign, settings)
    live = subprocess.Popen(
        [sys.executable, "-m", "quarl_bench.cli", "trials", "live", str(campaign), "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert live.stdin is not None and live.stdout is not None
    answered = 0
    for trial in range(7):
        for policy in ("fp32", "int8"):
            live.stdin.write(f"{policy} 1 t{trial}\n")
            live.stdin.flush()
            json.loads(live.stdout.readline())  # answered: recorded on disk before the answer
            answered += 1
    live.kill()  # mid-campaign, between trials
    live.wait(timeout=30)
    with open(campaign, "a") as handle:
        handle.write('{"policy": "fp32", "outco')  # as if a crash cut the next line short
    resumed = Campaign.open(campaign)
    assert len(resumed.trials) == answered == 14
    assert [t.trial for t in resumed.trials if t.policy == "int8"] == [f"t{n}" for n in range(7)]
    resumed.add(checked_trial(settings, "fp32", 1, "t7"))
    again = Campaign.open(campaign)
    assert len(again.trials) == 15 and again.trials[-1].trial == "t7"  # the cut line is gone, not glued on
    with pytest.raises(QuarlError, match="played it already"):
        again.add(checked_trial(settings, "int8", 1, "t3"))


def test_a_decided_campaign_takes_no_more_trials_and_its_verdict_is_the_csv_s(tmp_path: Path) -> None:
    settings = TrialSettings("fp32", "int8", epsilon=0.3)
    campaign = Campaign.start(tmp_path / "c.jsonl", settings)
    trial = 0
    while True:
        campaign.add(checked_trial(settings, "fp32", 1, f"t{trial}"))
        found = campaign.add(checked_trial(settings, "int8", 1, f"t{trial}"))
        trial += 1
        if not found.going_on:
            break
    assert found.verdict.verdict == "safe"
    with pytest.raises(QuarlError, match="is decided"):
        campaign.add(checked_trial(settings, "fp32", 1, f"t{trial}"))
    rows = [{"trial": t.trial, "policy": t.policy, "outcome": t.outcome} for t in campaign.trials]
    path = tmp_path / "same.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["trial", "policy", "outcome"])
        writer.writeheader()
        writer.writerows(rows)
    assert decide(settings, read_csv(path, settings)).verdict == found.verdict


def test_the_plan_simulates_the_test_itself(cli) -> None:
    code, out, err = cli("trials", "plan", "--rates", "0.9", "0.9", "--agreement", "0.95", "--epsilon", "0.1", "--json")
    assert code == 0, err
    plan = json.loads(out)["plan"]
    assert plan["P(safe)"] > 0.95 and plan["P(unsafe)"] < 0.01 and 30 < plan["mean pairs"] < 300
    code, _, err = cli("trials", "plan", "--rates", "0.9", "0.5", "--agreement", "0.99")
    assert code == 2 and "agree on at most" in err
