"""The certified record of a zoo: agents found or listed with a reason, verdicts through certify's own path, a
table of minimum certified precisions, and a diff that names the verdict that moved."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from quarl_bench.api.record import undetermined_reason
from quarl_bench.api.record_diff import diff_records, read_record
from quarl_bench.certify.result import Verdict


@pytest.mark.slow
def test_a_small_record_lists_what_cannot_run_and_a_diff_names_the_verdict_that_moved(
    cli, zoo: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "zoo"
    (folder / "dqn").mkdir(parents=True)
    (folder / "dqn" / "CartPole-v1_1").symlink_to(zoo / "dqn" / "CartPole-v1_1")
    (folder / "dqn" / "Breakout_1").mkdir()  # a folder of configs only, as the zoo's Atari ones
    (folder / "dqn" / "Breakout_1" / "config.yml").write_text("{}\n")
    store, out = tmp_path / "q.sqlite", tmp_path / "record"
    code, text, err = cli("record", "-f", folder, "--plan", "--store", store)
    assert code == 0, err
    assert "1 agents to certify" in text and "not run: dqn Breakout: no model zip" in text
    assert not store.exists()  # a plan runs nothing
    code, text, err = cli("record", "-f", folder, "--plan", "--budget", "5s", "--store", store)
    assert code == 0 and "1 agent(s) left out" in text and "0 agents to certify" in text  # ~27 s by the cost model
    code, _, err = cli("record", "-f", folder, "--plan", "--budget", "soon", "--store", store)
    assert code == 2 and "bad budget 'soon'" in err
    code, text, err = cli("record", "-f", folder, "--store", store, "--out", out)
    assert code == 0, err
    table = pd.read_csv(out / "record.csv", keep_default_na=False)
    cartpole = table[table["env"] == "CartPole-v1"].iloc[0]
    assert (
        float(cartpole["fp32 score"]) == 500.0
        and cartpole["RTN per tensor"] == "int8"
        and cartpole["status"] == "certified"
    )
    assert table[table["env"] == "Breakout"].iloc[0]["status"].startswith("not run: no model zip")
    assert "int8" in (out / "record.svg").read_text()  # the figure: minimum certified precision by algo x env
    run = json.loads((out / "record_run.json").read_text())  # the wall time against the plan, as reproduce's
    assert run["workers"] == 1 and run["executor"] == "local" and run["wall_seconds"] > 0
    assert run["wall_over_plan"] == pytest.approx(run["wall_seconds"] / run["plan_seconds"], rel=0.01)
    assert f"({run['wall_over_plan']:.2f}x) on 1 worker(s)" in text
    assert "questions (plan " in err and " elapsed" in err  # the heartbeat names the plan it runs against
    code, _, err = cli("record", "-f", folder, "--plan", "--address", "127.0.0.1:1", "--store", store)
    assert code == 2 and "a Ray address needs --executor ray" in err
    assert run["status"] == "finished" and run["earlier_runs"] == [] and run["questions_answered"][0] > 0
    cut_short = run | {"status": "running"}  # as a run killed with its session leaves it, at its last heartbeat
    (out / "record_run.json").write_text(json.dumps(cut_short))
    code, text, err = cli("record", "-f", folder, "--store", store, "--out", out)  # resumed: every verdict stored
    assert code == 0 and "stored" in text, err
    assert "with nothing planned (the store answered every question)" in text and "x) on" not in text
    resumed = json.loads((out / "record_run.json").read_text())
    assert resumed["wall_over_plan"] is None  # not wall / 0
    assert [r["wall_seconds"] for r in resumed["earlier_runs"]] == [run["wall_seconds"]]  # the wall of each run
    assert "with the 1 run(s) it continued" in text and "against the first run's plan of" in text

    old = read_record(out / "record_verdicts.csv")
    assert {"int8", "int6"} <= set(old["spec"].str.split().str[0])
    new = old.copy()
    moved = new.index[(new["spec"].str.startswith("int8")) & (new["family"] == "int")][0]
    other = "x86-vnni" if old.loc[moved, "cpu_kind"] == "x86-avx2" else "x86-avx2"  # the other CPU, on either
    new.loc[moved, "verdict"], new.loc[moved, "cpu_kind"] = "undetermined", other
    found = diff_records(old, new)
    assert len(found.changed) == 1 and found.changed.iloc[0]["verdict_new"] == "undetermined"
    assert found.confirmatory_changes == 1 and found.cpu_kinds[1] != found.cpu_kinds[0]
    new.to_csv(tmp_path / "new.csv", index=False)
    shutil.copy(out / "record_verdicts.csv", tmp_path / "old.csv")
    code, text, err = cli("record", "diff", tmp_path / "old.csv", tmp_path / "new.csv")
    assert code == 1 and "changed: dqn CartPole-v1 [nominal] int8" in text and "safe -> undetermined" in text
    code, text, _ = cli("record", "diff", tmp_path / "old.csv", store)  # a CSV against its own store: no change
    assert code == 0 and "0 verdicts changed" in text

    # under a suite too: each agent's ladder nominal and under the condition, α shared; a line per condition
    code, text, err = cli("record", "-f", folder, "--store", store, "--out", out, "--perturb", "action-noise=0.05")
    assert code == 0, err
    table = pd.read_csv(out / "record.csv", keep_default_na=False)
    assert sorted(table[table["env"] == "CartPole-v1"]["condition"]) == ["action-noise=0.05", "nominal"]
    tidy = pd.read_csv(out / "record_verdicts.csv", keep_default_na=False)
    assert {"nominal", "action-noise=0.05"} <= set(tidy["condition"])
    code, _, err = cli("record", "-f", folder, "--plan", "--perturb", "wind", "--store", store)
    assert code == 2 and "bad perturbation 'wind'" in err


def test_an_undetermined_verdict_in_the_record_says_its_pairs_and_the_interval_that_holds_minus_delta() -> None:
    capped = Verdict("fp16", "fp16", "undetermined", 1000, 4.72, -10.80, 20.24, 12.26, 0.0167)
    assert undetermined_reason(capped) == "fp16 (1000 pairs: [-10.8, +20.2] holds -12.3)"
    early = Verdict("int4", "int4", "undetermined", 20, 0.0, float("nan"), float("nan"), 5.0, 0.0167)
    assert undetermined_reason(early) == "int4 (20 pairs: too few for the asymptotic sequence)"


def test_the_record_figure_marks_an_undetermined_agent_and_draws_the_nominal_line() -> None:
    import matplotlib.pyplot as plt

    from quarl_bench.api.record import draw_record

    table = pd.DataFrame(
        {
            "algo": ["ppo", "ppo", "ppo"],
            "env": ["BipedalWalker-v3", "CartPole-v1", "CartPole-v1"],
            "condition": ["nominal", "nominal", "robot-light"],
            "RTN per tensor": ["undetermined", "int6", "fp16"],
            "status": "certified",
        }
    )
    figure = draw_record(table)
    texts = sorted(text.get_text() for text in figure.axes[0].texts)
    plt.close(figure)
    assert texts == ["int6", "undetermined"]  # an undetermined agent is no blank; the suite's line is not drawn


def test_the_caps_script_reads_the_pairs_a_verdict_would_take_from_its_interval() -> None:
    """scripts/record_caps.py on a verdict CSV: an interval of half-width 10 at 100 pairs, mean 0 against −δ = −5,
    needs (10/5)² x 100 = 400 pairs to clear it on the safe side, 100 at 2δ; a mean below −δ is read on the unsafe
    side; a decided verdict has no line."""
    import importlib.util

    path = Path(__file__).parent.parent / "scripts" / "record_caps.py"
    spec = importlib.util.spec_from_file_location("record_caps", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = pd.DataFrame(
        [
            {"algo": "ppo", "env": "E", "spec": "int6", "verdict": "undetermined", "episodes": 100, "mean": 0.0,
             "lower": -10.0, "upper": 10.0, "delta": 5.0},
            {"algo": "ppo", "env": "E", "spec": "int5", "verdict": "undetermined", "episodes": 100, "mean": -8.0,
             "lower": -14.0, "upper": -2.0, "delta": 5.0},
            {"algo": "ppo", "env": "E", "spec": "int8", "verdict": "safe", "episodes": 100, "mean": 0.0,
             "lower": -1.0, "upper": 1.0, "delta": 5.0},
        ]
    )  # fmt: skip
    table = module.caps(rows)
    assert table["variant"].tolist() == ["int6", "int5"]
    assert table.iloc[0]["side"] == "safe" and table.iloc[0]["pairs it would take (δ)"] == "~400"
    assert table.iloc[0]["at 2δ"] == "~100 (safe)"
    assert table.iloc[1]["side"] == "unsafe" and table.iloc[1]["pairs it would take (δ)"] == "~400"  # (6 / 3)² x 100
    assert table.iloc[1]["at 2δ"] == "~900 (safe)"  # mean -8 against -10: (6 / 2)² x 100


def test_a_stored_nominal_record_gives_the_pairs_a_suite_is_planned_at() -> None:
    """The plan of an agent under a suite reads its own stored nominal ladder's pairs: at the widest α split it
    was stored with (a nominal-only record's 3 families, then a suite's 6), never another agent's or a perturbed
    line's, never a verdict off the ladder."""
    from quarl_bench.api.record import nominal_pairs
    from quarl_bench.types import AgentRef

    ref = AgentRef("dqn", "CartPole-v1", "CartPole-v1", "folder", "dqn/CartPole-v1_1", "a" * 16)
    rows = pd.DataFrame(
        [
            {"agent_hash": "a" * 16, "spec": "fp16", "episodes": 100, "evidence": {"families": 3}},
            {"agent_hash": "a" * 16, "spec": "int8", "episodes": 300, "evidence": {"families": 3}},
            {"agent_hash": "a" * 16, "spec": "fp16", "episodes": 120, "evidence": {"families": 6}},
            {"agent_hash": "a" * 16, "spec": "int8", "episodes": 340, "evidence": {"families": 6, "perturbation": ""}},
            {"agent_hash": "a" * 16, "spec": "int8", "episodes": 999, "evidence": {"families": 6, "perturbation": "x"}},
            {"agent_hash": "a" * 16, "spec": "int3", "episodes": 999, "evidence": {"families": 6}},
            {"agent_hash": "b" * 16, "spec": "fp16", "episodes": 999, "evidence": {"families": 9}},
        ]
    )
    assert nominal_pairs(ref, rows) == 460
    assert nominal_pairs(ref, rows[rows["agent_hash"] == "b" * 16]) == 0
    assert nominal_pairs(ref, pd.DataFrame()) == 0


def test_a_resumed_record_plans_the_families_its_store_has_not_answered() -> None:
    """A nominal record stopped part-way (its fp16 verdict stored, the walk going on) is planned at its three
    families, not as done; each family answered takes its third off; a whole ladder leaves nothing."""
    from quarl_bench.api.record import Candidate, PlanContext, agent_seconds
    from quarl_bench.types import AgentRef

    ref = AgentRef("ppo", "CartPole-v1", "CartPole-v1", "folder", "ppo/CartPole-v1_1", "a" * 16)
    agent = Candidate("ppo", "CartPole-v1", ref)

    def planned(*specs: tuple[str, str]) -> float:
        rows = pd.DataFrame(
            [{"agent_hash": "a" * 16, "spec": s, "verdict": v, "episodes": 200, "evidence": {"families": 3}}
             for s, v in specs],
            columns=["agent_hash", "spec", "verdict", "episodes", "evidence"],
        )  # fmt: skip
        return agent_seconds(agent, PlanContext(verdicts=rows))

    fresh = planned()
    assert fresh > 0
    assert planned(("fp16", "safe")) == fresh
    walk_stopped = (("fp16", "safe"), ("int8", "undetermined"))
    assert planned(*walk_stopped) == pytest.approx(fresh * 2 / 3)
    assert planned(*walk_stopped, ("int4 per-channel", "safe")) == pytest.approx(fresh / 3)
    assert planned(*walk_stopped, ("int4 per-channel", "safe"), ("int8 a8 cal-minmax1000", "unsafe")) == 0
