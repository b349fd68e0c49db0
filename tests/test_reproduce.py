"""``quarl-bench reproduce``: the plan names every artifact, its agents and gaps and what it costs; a budget
leaves out what does not fit; bad input is one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from quarl_bench.api.reproduce import ARTIFACT_NAMES, PlanLine, parse_duration, within_budget
from quarl_bench.errors import Interrupted, QuarlError
from quarl_bench.parsers.reproduce import ARTIFACTS


def test_durations_and_the_artifact_list_the_parser_offers() -> None:
    assert [parse_duration(text) for text in ("90s", "30m", "2h", "1h30m")] == [90, 1800, 7200, 5400]
    for bad in ("", "soon", "30", "m"):
        with pytest.raises(QuarlError, match="bad budget"):
            parse_duration(bad)
    assert ARTIFACTS == ARTIFACT_NAMES  # the parser's choices (no import of the api at --help) stay the api's


def test_a_budget_keeps_what_fits_in_order_and_says_what_it_left_out() -> None:
    from quarl_bench.api.reproduce import ARTIFACTS as artifacts

    lines = [
        PlanLine(artifact, [], seconds=seconds) for artifact, seconds in zip(artifacts, (600, 3600, 300), strict=False)
    ]
    chosen, left = within_budget(lines, 1000)
    assert [line.seconds for line in chosen] == [600, 300] and [line.seconds for line in left] == [3600]
    assert within_budget(lines, None) == (lines, [])


def test_the_plan_lists_every_artifact_with_its_agents_and_gaps(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "q.sqlite"
    code, out, err = cli("reproduce", "--plan", "-f", zoo, "--store", store, "--budget", "20m")
    assert code == 0, err
    text = " ".join(out.split())
    for name in ARTIFACT_NAMES:
        assert f"{name}:" in text
    assert "ppo/BreakoutNoFrameskip-v4 (folder)" in text  # the zoo's one Atari PPO agent, and where it is from
    assert "dqn/PongNoFrameskip-v4" in text and "sb3/ALGO-ENV" in text  # a gap, with the hub id that fills it
    assert "left out by --budget 20m: table5" in text
    assert not store.exists() or store.stat().st_size < 100_000  # a plan runs nothing


def test_bad_reproduce_input_is_one_line(cli, tmp_path: Path) -> None:
    code, _, err = cli("reproduce", "--plan", "--budget", "soon", "--store", tmp_path / "q.sqlite")
    assert code == 2 and err.strip().splitlines() == [
        "quarl-bench: error: bad budget 'soon': expected a duration such as 90s, 30m, 2h or 1h30m"
    ]


@pytest.mark.parametrize(
    ("flags", "estimate", "source"), [(("avx512_bf16",), "19m42s", "results of record"), ((), "3h00m", "without bf16")]
)
def test_table5_s_estimate_follows_the_cpu_s_bf16_arithmetic(
    cli, monkeypatch, tmp_path: Path, flags, estimate, source
) -> None:
    from quarl_bench.deploy import machine

    monkeypatch.setattr(machine, "half_features", lambda: flags)
    code, out, err = cli("reproduce", "--plan", "--only", "table5", "--store", tmp_path / "q.sqlite")
    assert code == 0, err
    text = " ".join(out.split())
    assert estimate in text and source in text  # large bf16 took 12 ms per update with avx512_bf16, > 37 min without


def test_a_qat_run_whose_agent_is_cached_and_rows_stored_is_not_planned_again(monkeypatch, tmp_path: Path) -> None:
    """``sweep qat`` resumes from the agents an earlier run cached and the rows it stored: the plan says so (it
    once priced all 36 runs at 23 minutes against a store that held every one of their rows)."""
    from types import SimpleNamespace

    from quarl_bench.api.reproduce import plan_reproduction
    from quarl_bench.api.sweep import agent_sources
    from quarl_bench.run import runner
    from quarl_bench.store import ResultStore

    store = ResultStore(tmp_path / "q.sqlite")
    sources = agent_sources(None, tmp_path / "agents", use_hub=False)
    (fresh,) = plan_reproduction(sources, store, only=("qat",))
    assert fresh.jobs_to_run == 36 and fresh.already_stored == 0 and fresh.seconds > 600  # trains every agent

    keys = ("qat-row", "fp32-row")  # a cached agent's jobs: its QAT precision and its fp32 reference
    stored = set(keys)
    monkeypatch.setattr(runner, "known_jobs", lambda work: [SimpleNamespace(key=key) for key in keys])
    monkeypatch.setattr(store, "has", lambda key: key in stored)
    (resumed,) = plan_reproduction(sources, store, only=("qat",))
    assert (resumed.jobs_to_run, resumed.already_stored, resumed.seconds) == (0, 72, 0.0)

    stored.discard("qat-row")  # agents cached, one row per run missing: evaluation only, no training
    (partial,) = plan_reproduction(sources, store, only=("qat",))
    assert partial.jobs_to_run == 36 and 0 < partial.seconds < fresh.seconds / 10


@pytest.mark.parametrize(("gpu", "runs_dqn_only"), [(False, True), (True, False)])
def test_actorq_without_a_gpu_learner_runs_its_dqn_rows_and_says_why(
    cli, monkeypatch, tmp_path: Path, gpu: bool, runs_dqn_only: bool
) -> None:
    """A CPU learner of the paper's width is learner-bound (363 updates in a 138 s run): the DMC rows would cost ~5 h
    and measure no time to reward, so a machine without a GPU runs the DQN rows, and the plan says so."""
    from quarl_bench.api import reproduce

    monkeypatch.setattr(reproduce, "gpu_visible", lambda: gpu)
    code, out, err = cli("reproduce", "--plan", "--only", "actorq", "--store", tmp_path / "q.sqlite")
    assert code == 0, err
    text = " ".join(out.split())
    assert ("actorq: torch sees no GPU: the DQN rows only" in text) == runs_dqn_only
    # five seeds a run (a speed-up's interval): 5 x 850 s for the DQN rows, 5 x 21 x 900 s with a GPU
    assert ("1h10m" in text) == runs_dqn_only and ("26h15m" in text) != runs_dqn_only


def test_the_plan_counts_published_cells_and_those_this_zoo_reaches(cli, zoo: Path, tmp_path: Path) -> None:
    """The plan counted agents, not cells ("18 of 84 Table 2 cells" was in the docs only), and ActorQ Table 2 as 11
    rows where its page counts 33 cells (per task: fp32's time to target, the fp16 and int8 speed-ups)."""
    code, out, err = cli(
        "reproduce", "--plan", "--only", "table2", "actorq", "-f", zoo, "--store", tmp_path / "q.sqlite"
    )
    assert code == 0, err
    text = " ".join(out.split())
    assert "84 (18 here)" in text and "│ 33 │" in text


def test_a_long_evaluation_says_how_far_it_got(cli, zoo: Path, tmp_path: Path, monkeypatch) -> None:
    """100 Breakout games ran 5-11 minutes with nothing printed: an evaluation now says, every minute (here every
    step), how many of its episodes are done."""
    from quarl_bench.evaluation import evaluate

    monkeypatch.setattr(evaluate, "HEARTBEAT_SECONDS", 0.0)
    agent = ("--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--store", tmp_path / "q.sqlite")
    code, _, err = cli("run", *agent, "--bits", "8", "-n", "4")
    assert code == 0, err
    assert re.search(r"evaluating: \d of 4 episodes in", err)


@pytest.mark.slow
def test_a_second_reproduction_keeps_the_first_s_record_and_says_its_ratio(cli, zoo: Path, tmp_path: Path) -> None:
    arguments = ("reproduce", "--quick", "--only", "table5", "-f", zoo, "--store", tmp_path / "q.sqlite")
    for _ in range(2):
        code, out, err = cli(*arguments, "--out", tmp_path / "out")
        assert code == 0, err
    text = " ".join(out.split())
    assert re.search(r"table5: \S+ against an estimate of \S+ \(\d+\.\d\dx\); load", text)
    assert re.search(r"Reproduction: \S+ in all against the plan's \S+ \(\d+\.\d\dx;", text)
    kept = sorted(p.name for p in (tmp_path / "out").glob("reproduction*.json"))
    assert len(kept) == 2 and kept[-1] == "reproduction.json"  # the first run's record renamed, not overwritten


@pytest.mark.slow
def test_a_reproduction_the_store_already_holds_says_nothing_was_planned(cli, zoo: Path, tmp_path: Path) -> None:
    arguments = ("reproduce", "--quick", "--only", "table2", "-f", zoo, "--store", tmp_path / "q.sqlite")
    for _ in range(2):
        code, out, err = cli(*arguments, "--out", tmp_path / "out")
        assert code == 0, err
    text = " ".join(out.split())
    assert "(stored)" in text and re.search(
        r"table2: \S+ with nothing estimated \(the store held every job\); load", text
    )
    assert "in all with nothing planned (the store held every job;" in text
    assert not re.search(r"\d{5,}\.\d\dx", text)  # not a wall time over 0 s (it printed 5300000000.00x)


def test_a_reproduction_stopped_part_way_leaves_what_it_did_and_the_next_carries_it(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """``reproduction.json`` was written at the end only: a reproduction stopped in its third hour left nothing. It
    is now kept as ``record_run.json`` is (``RunLog``): Ctrl-C in the second artifact (its command exits 130) stops
    the reproduction, not only that artifact, and leaves ``interrupted`` with the first's wall; the run that resumes it
    carries it and says the wall of both against the first plan."""
    import json

    import quarl_bench.cli
    from quarl_bench.api.reproduce import ARTIFACTS as artifacts
    from quarl_bench.commands.reproduce import run_artifacts

    played: list[str] = []

    def main_stopped_at(stop_at: str | None):
        def main(argv: list[str]) -> int:
            played.append(argv[0])
            return 130 if argv[0] == stop_at else 0  # as cli.main returns on Ctrl-C

        return main

    lines = [PlanLine(artifacts[0], ["sweep"], seconds=60.0), PlanLine(artifacts[1], ["qat"], seconds=120.0)]
    out, store = tmp_path / "out", tmp_path / "q.sqlite"
    monkeypatch.setattr(quarl_bench.cli, "main", main_stopped_at("qat"))
    with pytest.raises(Interrupted, match=f"{artifacts[1].name} stopped part-way"):
        run_artifacts(lines, store, out, quick=True)
    stopped = json.loads((out / "reproduction.json").read_text())
    assert stopped["status"] == "interrupted" and stopped["stopped_by"] == "Interrupted"
    assert stopped["artifacts_done"] == [1, 2]
    assert [(a["name"], a["exit_code"]) for a in stopped["artifacts"]] == [
        (artifacts[0].name, 0),
        (artifacts[1].name, 130),
    ]
    assert stopped["plan_seconds"] == 180.0

    monkeypatch.setattr(quarl_bench.cli, "main", main_stopped_at(None))
    capsys.readouterr()
    assert run_artifacts(lines[1:], store, out, quick=True) == 0
    resumed = json.loads((out / "reproduction.json").read_text())
    assert resumed["status"] == "finished" and resumed["artifacts_done"] == [1, 1]
    assert [run["status"] for run in resumed["earlier_runs"]] == ["interrupted"]
    assert len(resumed["earlier_runs"][0]["artifacts"]) == 2
    text = " ".join(capsys.readouterr().out.split())
    assert re.search(r"with the 1 run\(s\) it continued \(cut short, from \S+reproduction.json\): \S+ in all", text)
    assert "against the first run's plan of 3m00s" in text
    assert played == ["sweep", "qat", "qat", "report"]  # the stopped artifact again, then the report
    assert not list(out.glob("reproduction-*.json"))  # the run it continued is in its file, not set aside

    assert run_artifacts(lines[1:], store, out, quick=True) == 0  # a finished one is set aside, not continued
    assert len(list(out.glob("reproduction-*.json"))) == 1
    assert json.loads((out / "reproduction.json").read_text())["earlier_runs"] == []

    monkeypatch.setattr(quarl_bench.cli, "main", main_stopped_at("report"))  # Ctrl-C in the report: not "finished"
    with pytest.raises(Interrupted, match="the report stopped part-way"):
        run_artifacts(lines[1:], store, out, quick=True)
    assert json.loads((out / "reproduction.json").read_text())["status"] == "interrupted"


def test_ctrl_c_is_one_line_and_exit_130(cli, tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C in a reproduction printed a traceback through the worker pool's shutdown and died by the signal."""
    from quarl_bench.commands import reproduce

    def stopped(*_: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(reproduce, "run_artifacts", stopped)
    code, _, err = cli("reproduce", "--quick", "--only", "table5", "--store", tmp_path / "q.sqlite")
    assert code == 130 and err.strip().splitlines() == [
        "quarl-bench: interrupted (Ctrl-C): what was stored before it stays stored"
    ]
