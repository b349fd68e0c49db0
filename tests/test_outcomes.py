"""Outcomes beside the return: success, progress, cost and whether an episode ended on its own are recorded as
episodes are played, stored per episode, and certified as a paired rate (``certify --outcome``): a success rate's
verdicts are their own line in the report, never merged with the return's."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from quarl_bench.certify.outcome import outcome_values
from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.outcomes import OutcomeTracker, per_outcome
from quarl_bench.store import ResultStore

DATA = Path(__file__).parent / "data"
REACH_POLICY = """import torch


def make():
    net = torch.nn.Linear(2, 3)  # (position, target) -> left, stay, right: move toward the target
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[10.0, -10.0], [0.0, 0.0], [-10.0, 10.0]]))
        net.bias.copy_(torch.tensor([0.0, 0.3, 0.0]))
    return net
"""


def test_an_episode_s_outcomes_come_from_its_last_info_and_its_summed_cost() -> None:
    tracker = OutcomeTracker(2)
    tracker.step([{"cost": 1.0}, {}])
    tracker.step([{"cost": 0.5}, {}])
    last = {"is_success": True, "progress": 0.75, "TimeLimit.truncated": True}
    assert tracker.finish(0, last) == {"terminated": 0.0, "success": 1.0, "progress": 0.75, "cost": 1.5}
    assert tracker.finish(1, {}) == {"terminated": 1.0}  # no cost reported: none recorded, not a cost of 0
    tracker.step([{"cost": 2.0}, {}])
    assert tracker.finish(0, {})["cost"] == 2.0  # the next episode's cost starts from 0
    # an outcome some episodes lack is dropped: its rate would not pair with another row's
    assert per_outcome([{"terminated": 1.0, "success": 1.0}, {"terminated": 0.0}]) == {"terminated": [1.0, 0.0]}


def test_each_success_rule_reads_the_stored_episodes_higher_is_better() -> None:
    row = {
        "key": "k",
        "env_id": "Env-v0",
        "episode_rewards": [500.0, 120.0, 480.0],
        "episode_outcomes": {"success": [1.0, 0.0, 1.0], "terminated": [0.0, 1.0, 1.0], "cost": [0.0, 3.0, 1.0]},
    }
    assert list(outcome_values(row, "success", "info")) == [1.0, 0.0, 1.0]
    assert list(outcome_values(row, "success", "terminated")) == [0.0, 1.0, 1.0]
    assert list(outcome_values(row, "success", "truncated")) == [1.0, 0.0, 0.0]
    assert list(outcome_values(row, "success", "return>=475")) == [1.0, 0.0, 1.0]
    assert list(outcome_values(row, "cost", "info")) == [-0.0, -3.0, -1.0]  # lower cost is better
    with pytest.raises(QuarlError, match="reported no 'progress'") as refused:
        outcome_values(row, "progress", "info")
    assert "\n" not in str(refused.value)


@pytest.mark.slow
def test_a_success_rate_is_certified_on_its_own_line(cli, zoo: Path, tmp_path: Path) -> None:
    """dqn CartPole balances to the time limit: int8 keeps every episode's success (certified within ε 0.1 in 40
    pairs: (1 - 0.1)^t <= 0.05 needs t >= 29, so two batches of 20), int2 loses them all."""
    store = tmp_path / "q.sqlite"
    agent = ("--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--store", store)
    success = ("--outcome", "success", "--success", "truncated", "--tolerance-abs", "0.1")
    code, out, err = cli("certify", *agent, "--bits", "8", "2", *success)
    assert code == 0, err
    assert "int8: safe" in out and "int2: unsafe" in out and "certified minimum safe precision int8" in out
    code, out, err = cli("certify", *agent, "--bits", "8")
    assert code == 0, err
    code, out, err = cli("certify", *agent, "--bits", "8", *success, "--unpaired")  # a real robot's design
    assert code == 0, err
    assert "int8: safe" in out and "40 unpaired episodes" in out
    with ResultStore(store) as opened:
        verdicts = opened.verdicts()
        rows = opened.to_dataframe()
    int8 = verdicts[verdicts["precision"] == "int8"]
    assert sorted(s.get("outcome", "return") for s in int8["settings"]) == ["return", "success", "success"]
    assert int8["key"].nunique() == 3 and {e["outcome"] for e in int8["evidence"]} == {"return", "success"}
    assert sorted(e.get("design") for e in int8["evidence"]) == ["paired", "paired", "unpaired"]
    fp32_seeds, int8_seeds = (set(rows[rows["precision"] == p]["seed"]) for p in ("fp32", "int8"))
    assert len(int8_seeds - fp32_seeds) == 2  # the unpaired int8 batches played seeds fp32 never did
    assert all(len(o["terminated"]) == n for o, n in zip(rows["episode_outcomes"], rows["episodes"], strict=True))
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    outcomes = sorted(pd.read_csv(tmp_path / "report" / "certified_verdicts.csv")["outcome"])
    success = "success (ran to its time limit)"
    assert outcomes == ["return", success, f"{success}, unpaired"]  # the unpaired verdict: a line of its own


@pytest.mark.slow
def test_success_and_cost_of_an_env_that_reports_them(cli, tmp_path: Path) -> None:
    sys.path.insert(0, str(DATA))
    (tmp_path / "reach.py").write_text(REACH_POLICY)
    store = tmp_path / "q.sqlite"
    agent = ("--policy-module", f"{tmp_path / 'reach.py'}:make", "--env", "ReachLine-v0", "--env-package", "reach_line")
    code, out, err = cli(
        "certify", *agent, "--bits", "8", "--outcome", "success", "--tolerance-abs", "0.1", "--store", store
    )
    assert code == 0, err
    assert "int8: safe" in out
    # a robot campaign's plan from this sim certification: its rates and the agreement of its pairs
    code, out, err = cli("trials", "plan", "--from", store, "--candidate", "int8", "--epsilon", "0.1", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["rates"] == [1.0, 1.0] and plan["agreement"] == 1.0 and plan["plan"]["P(safe)"] == 1.0
    assert plan["from"]["verdict"].endswith("int8 nominal")
    code, _, err = cli("trials", "plan", "--from", store, "--candidate", "int4")
    assert code == 2 and "0 success verdicts match precision 'int4'" in err and len(err.strip().splitlines()) == 1
    cost = ("--outcome", "cost", "--tolerance-abs", "1", "--return-bounds", "0", "40")
    code, out, err = cli("certify", *agent, "--bits", "8", *cost, "--store", store)
    assert code == 0, err
    assert "int8: safe" in out
    with ResultStore(store) as opened:
        rows = opened.to_dataframe()
    fp32 = rows[rows["precision"] == "fp32"].iloc[0]
    assert set(fp32["episode_outcomes"]) == {"success", "cost", "terminated", "steps_to_success"}
    assert np.mean(fp32["episode_outcomes"]["success"]) == 1.0  # it reaches the target in every episode
    assert fp32["episode_outcomes"]["terminated"] == fp32["episode_outcomes"]["success"]  # reaching ends it
    code, out, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    table = (tmp_path / "report" / "outcomes.csv").read_text()
    first = f"{len(fp32['episode_rewards'])}/{len(fp32['episode_rewards'])} (100%, 95% CI"
    assert first in table and "mean cost" in table.splitlines()[0]  # the success rate with its Wilson interval


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--outcome", "success", "--tolerance-abs", "0.1"), "CartPole-v1 reports no 'is_success' in its info"),
        (("--outcome", "success", "--tolerance-abs", "1.5"), "bad ε 1.5 for --outcome success"),
        (("--outcome", "success"), "--outcome success needs --tolerance-abs EPS"),
        (("--outcome", "cost", "--tolerance-abs", "1"), "--outcome cost needs --return-bounds LO HI"),
        (("--outcome", "success", "--success", "return>", "--tolerance-abs", "0.1"), "bad success rule 'return>'"),
        (("--outcome", "latency", "--tolerance-abs", "0.1"), "invalid choice: 'latency'"),
    ],
)
def test_bad_outcomes_are_one_line_exit_2_nothing_stored(cli, zoo: Path, tmp_path: Path, flags, message) -> None:
    store = tmp_path / "q.sqlite"
    code, _, err = cli("certify", "--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, *flags, "--store", store)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not store.exists()


@pytest.mark.slow
def test_a_goal_reaching_arm_trained_with_her_is_certified_on_its_success(cli, tmp_path: Path) -> None:
    """panda-gym's PandaReach-v3 (the robot extra): TQC + HER from rl-zoo3's settings, Dict observations, success
    from ``info["is_success"]``. 1,500 steps train no good arm; what is checked is the path a trained one takes:
    the HER zip loads without its buffer, Dict observations play and pair, and the rate is certified."""
    pytest.importorskip("panda_gym")
    cache = tmp_path / "agents"
    code, out, err = cli("train", "--algo", "tqc", "--env", "PandaReach-v3", "-n", "1500", "--cache", cache)
    assert code == 0, err
    store = tmp_path / "q.sqlite"
    agent = ("--algo", "tqc", "--env", "PandaReach-v3", "--folder", cache, "--store", store)
    success = ("--outcome", "success", "--tolerance-abs", "0.5", "--max-episodes", "40")
    code, out, err = cli("certify", *agent, "--bits", "8", *success, "--perturb", "action-noise=0.1")
    assert code == 0, err
    assert re.search(r"int8: (safe|unsafe|undetermined)", out)
    with ResultStore(store) as opened:
        rows = opened.to_dataframe()
    assert set(rows["perturbation"]) == {"action-noise=0.1"}
    for outcomes, episodes in zip(rows["episode_outcomes"], rows["episodes"], strict=True):
        assert len(outcomes["success"]) == episodes and set(outcomes["success"]) <= {0.0, 1.0}
    code, _, err = cli("run", *agent, "--bits", "8", "-n", "4", "--perturb", "obs-noise-raw@goal=0.01")
    assert code == 2 and "has no key 'goal'; its keys are achieved_goal, desired_goal, observation" in err


JUDGE = """def reached(episode):
    position, target = episode.final_observation
    return abs(position - target) < 0.05


def closeness(episode):
    position, target = episode.final_observation
    return max(0.0, 1.0 - abs(position - target))
"""


@pytest.mark.slow
def test_a_user_function_judges_success_and_progress_on_rows_of_its_own(cli, tmp_path: Path) -> None:
    sys.path.insert(0, str(DATA))
    (tmp_path / "reach.py").write_text(REACH_POLICY)
    (tmp_path / "judge.py").write_text(JUDGE)
    store = tmp_path / "q.sqlite"
    agent = ("--policy-module", f"{tmp_path / 'reach.py'}:make", "--env", "ReachLine-v0", "--env-package", "reach_line")
    judge = f"{tmp_path / 'judge.py'}"
    code, _, err = cli("run", *agent, "--bits", "8", "-n", "10", "--success", f"{judge}:reached", "--store", store)
    assert code == 0, err
    progress = ("--outcome", "progress", "--progress", f"{judge}:closeness", "--tolerance-abs", "0.1")
    code, out, err = cli("certify", *agent, "--bits", "8", *progress, "--store", store)
    assert code == 0, err
    assert "int8: safe" in out
    with ResultStore(store) as opened:
        rows = opened.to_dataframe()
        verdicts = opened.verdicts()
    source = hashlib.sha256(Path(judge).read_bytes()).hexdigest()[:12]  # the rule's identity holds its source's hash
    assert set(rows["judge"]) == {f"success={judge}:reached@{source}", f"progress={judge}:closeness@{source}"}
    judged = rows[rows["judge"].str.startswith("progress")]
    values = np.concatenate([o["progress"] for o in judged["episode_outcomes"]])
    assert 0.9 < values.min() <= values.max() <= 1.0  # the reach policy ends within 0.1 of its target
    assert verdicts.iloc[0]["settings"]["progress"] == f"{judge}:closeness@{source}"
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    assert f"success={judge}:reached@{source}" in (tmp_path / "report" / "outcomes.csv").read_text()
    from quarl_bench.report.robustness import robustness_report

    perturbed = rows.assign(perturbation="sticky=0.1", key=rows["key"] + "p", judge="")
    both = pd.concat([rows, perturbed], ignore_index=True)  # judged and unjudged rows of the same episodes
    [table, *_] = robustness_report(both)
    assert set(table.frame["rows"].str.split().explode()) <= set(perturbed["key"])  # no judged row joins a cell
    code, _, err = cli(
        "certify", *agent, "--outcome", "success", "--success", f"{judge}:nothing", "--tolerance-abs", "0.1"
    )
    assert code == 2 and "has no function 'nothing'" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_equivalence_form_of_a_success_rate_walks_on_equivalent_and_has_its_own_line(
    cli, zoo: Path, tmp_path: Path
) -> None:
    store = tmp_path / "q.sqlite"
    agent = ("--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--store", store)
    success = ("--outcome", "success", "--success", "truncated", "--tolerance-abs", "0.1")
    code, out, err = cli("certify", *agent, "--bits", "8", "4", *success, "--equivalence")
    assert code == 0, err
    assert "int8: equivalent" in out and "int4: different" in out and "minimum equivalent precision int8" in out
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    grid = pd.read_csv(tmp_path / "report" / "certified_verdicts.csv")
    assert set(grid["outcome"]) == {"success (ran to its time limit), equivalence"}


def test_an_edited_judge_is_a_new_question_and_what_it_prints_is_shown(cli, tmp_path: Path) -> None:
    """A judge's identity is its rule and its source: edited in place, it is played again, never answered from the
    old rule's rows; it sees the raw final observation, and its prints are not silenced."""
    sys.path.insert(0, str(DATA))
    (tmp_path / "reach.py").write_text(REACH_POLICY)
    judge = tmp_path / "judge.py"
    judge.write_text(JUDGE)
    store = tmp_path / "q.sqlite"
    agent = ("--policy-module", f"{tmp_path / 'reach.py'}:make", "--env", "ReachLine-v0", "--env-package", "reach_line")
    success = ("--outcome", "success", "--success", f"{judge}:reached", "--tolerance-abs", "0.5")
    certify = ("certify", *agent, "--bits", "8", *success, "--batch", "10", "--max-episodes", "10", "--store", store)
    code, out, err = cli(*certify, "--json")
    assert code in (0, 1), err
    first = json.loads(out.strip().splitlines()[-1])["verdicts"][0]
    judge.write_text("def reached(episode):\n    print('judged', len(episode.final_observation))\n    return False\n")
    code, out, err = cli(*certify, "--json")
    assert code in (0, 1), err
    second = json.loads(out.strip().splitlines()[-1])["verdicts"][0]
    assert not second["reused"] and second["judge"] != first["judge"]  # a new question: played again
    assert second["judge"].startswith(f"success={judge}:reached@")
    assert "judged 2" in out + err  # the judge's own print reached the console
    with ResultStore(store) as opened:
        assert len(set(opened.to_dataframe()["judge"])) == 2


def test_a_success_verdict_carries_both_rates_and_says_when_the_reference_rarely_succeeds() -> None:
    from quarl_bench.certify.outcome import arm_outcomes

    found = arm_outcomes("success", np.array([1.0] * 37 + [0.0] * 3), np.array([1.0] * 38 + [0.0] * 2))
    assert (found["quantized_successes"], found["reference_successes"], found["outcome_pairs"]) == (37, 38, 40)
    assert "warning" not in found
    rare = arm_outcomes("success", np.zeros(40), np.array([1.0] * 3 + [0.0] * 37))
    assert rare["warning"].startswith("the reference succeeds in 3 of 40 pairs")
    assert "cannot fail" in arm_outcomes("success", np.ones(20), np.ones(20))["warning"]
    assert set(arm_outcomes("return", np.ones(3), np.zeros(3))) == {"quantized_mean", "reference_mean"}


def test_results_show_the_success_rate_and_export_outcomes_as_json() -> None:
    from quarl_bench.report.console_rows import rows_table
    from quarl_bench.store.results import as_text_columns, success_rate

    assert success_rate({"success": [1.0, 0.0, 1.0, 1.0]}) == 0.75 and success_rate({}) != success_rate({})
    row = {"algo": "tqc", "env_id": "PandaReach-v3", "method": "ptq", "precision": "int8", "mean_reward": -2.0}
    row |= {"std_reward": 1.0, "error_pct": 0.5, "episodes": 4, "seed": 0, "recipe": "", "obs_noise": 0.0}
    row |= {"perturbation": "action-noise=0.2", "episode_outcomes": {"success": [1.0, 1.0, 0.0, 1.0]}}
    table = rows_table(pd.DataFrame([row]), "rows")
    assert [c.header for c in table.columns][-1] == "success" and list(table.columns[-1].cells) == ["3/4"]
    assert list(table.columns[5].cells) == ["action-noise=0.2"]  # the condition, beside the recipe
    exported = as_text_columns(pd.DataFrame([row]))
    assert json.loads(exported["episode_outcomes"][0]) == {"success": [1.0, 1.0, 0.0, 1.0]}


TRAJECTORY_JUDGE = """def quick(episode):
    steps = episode.trajectory
    assert len(steps.observations) == len(steps.actions) == len(steps.rewards) == episode.length
    assert len(steps.raw_observations) == episode.length
    return episode.length <= 50
"""


def test_a_judge_sees_the_whole_trajectory(cli, tmp_path: Path) -> None:
    sys.path.insert(0, str(DATA))
    (tmp_path / "reach.py").write_text(REACH_POLICY)
    (tmp_path / "judge.py").write_text(TRAJECTORY_JUDGE)
    agent = ("--policy-module", f"{tmp_path / 'reach.py'}:make", "--env", "ReachLine-v0", "--env-package", "reach_line")
    store = tmp_path / "q.sqlite"
    code, _, err = cli(
        "run", *agent, "--bits", "8", "-n", "4", "--success", f"{tmp_path / 'judge.py'}:quick", "--store", store
    )
    assert code == 0, err
    with ResultStore(store) as opened:
        outcomes = opened.to_dataframe()["episode_outcomes"]
    assert all(len(o["success"]) == 4 for o in outcomes)


def test_steps_to_success_is_the_first_successful_step_bounded_by_the_length() -> None:
    tracker = OutcomeTracker(2)
    for t in range(5):
        tracker.step([{"is_success": t >= 2}, {"is_success": False}])
    assert tracker.finish(0, {"is_success": True})["steps_to_success"] == 3.0  # first success at step 3
    assert tracker.finish(1, {"is_success": False})["steps_to_success"] == 5.0  # never: the episode's length
    tracker.step([{"is_success": True}, {}])
    assert tracker.finish(0, {})["steps_to_success"] == 1.0  # a new episode counts from its own first step
    row = {"episode_rewards": [0.0, 0.0], "episode_outcomes": {"steps_to_success": [3.0, 50.0]}}
    assert list(outcome_values(row, "steps", "info")) == [-3.0, -50.0]  # lower is better: read negated


def test_certify_decides_the_time_to_success(cli, tmp_path: Path) -> None:
    """ReachLine reports is_success: certify --outcome steps, bounded by its time limit, decides int8 safe."""
    sys.path.insert(0, str(DATA))
    (tmp_path / "reach.py").write_text(REACH_POLICY)
    agent = ("--policy-module", f"{tmp_path / 'reach.py'}:make", "--env", "ReachLine-v0", "--env-package", "reach_line")
    steps = ("--outcome", "steps", "--tolerance-abs", "10", "--batch", "20", "--max-episodes", "60")
    code, out, err = cli("certify", *agent, "--bits", "8", *steps, "--store", tmp_path / "q.sqlite", "--json")
    assert code in (0, 1), err
    verdict = json.loads(out.strip().splitlines()[-1])["verdicts"][0]
    assert (
        verdict["outcome"] == "steps" and verdict["bounds"][1] == 0.0 and verdict["verdict"] in ("safe", "undetermined")
    )
