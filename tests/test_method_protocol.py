"""A new method is one module: a config, a handler registered for it, and nothing else. This file is that module
for a toy method, run by the same executors as every real one; its rows resume like a sweep's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest

from quarl_bench.errors import QuarlError
from quarl_bench.jobs.grids import EvalSettings
from quarl_bench.jobs.work import Work
from quarl_bench.methods.agent_evaluation import AgentEvaluation
from quarl_bench.methods.protocol import OfAgent, evaluator, handler, register, register_evaluator
from quarl_bench.methods.ptq import PTQConfig
from quarl_bench.run.executors import make_executor, run_all
from quarl_bench.run.runner import run_work
from quarl_bench.store import ResultStore
from quarl_bench.types import EvalResult, Job, QuantSpec


@dataclass(frozen=True)
class ConstantConfig:
    """A "method" whose policy scores ``value`` in every episode, once per precision."""

    value: float
    precisions: tuple[str, ...] = ("fp32", "int8")
    algo: str = "toy"
    env_id: str = "Constant-v0"
    method: ClassVar[str] = "constant"

    @classmethod
    def from_cell(cls, cell) -> ConstantConfig:
        """A grid cell's run: the policy scores its seed + 1."""
        return cls(float(cell.seed) + 1, ("fp32", cell.precision), cell.algo, cell.env_id)


@register(ConstantConfig)
class ConstantHandler:
    ray = "any node"

    def agent(self, work: Work) -> None:
        return None

    def jobs(self, work: Work, agent: None) -> list[Job]:
        config = work.config
        return [
            Job(
                config.algo,
                config.env_id,
                QuantSpec(p),
                f"value{config.value}",
                work.settings.episodes,
                method="constant",
            )
            for p in config.precisions
        ]

    def produce(self, work: Work, agent: None, jobs: list[Job]) -> Iterator[EvalResult]:
        for job in jobs:
            rewards = (work.config.value,) * job.episodes
            yield EvalResult(job, rewards, (1,) * job.episodes, 0.0, provenance={"agent_source": "constant"})


@pytest.mark.parametrize("workers", [1, 2])
def test_a_registered_toy_method_runs_on_the_executors_and_resumes(tmp_path: Path, workers: int) -> None:
    store_path = tmp_path / "quarl.sqlite"
    works = [Work(ConstantConfig(value), EvalSettings(3)) for value in (1.0, 2.0)]
    with ResultStore(store_path) as store:
        run_all(make_executor("local", store, workers), works)
        frame = store.to_dataframe()
    assert sorted(zip(frame["precision"], frame["mean_reward"], strict=True)) == [
        ("fp32", 1.0),
        ("fp32", 2.0),
        ("int8", 1.0),
        ("int8", 2.0),
    ]
    assert set(frame["method"]) == {"constant"} and (frame["episodes"] == 3).all()
    int8 = frame[frame["precision"] == "int8"]
    assert (int8["error_pct"] == 0).all()  # each int8 row's E% from its own fp32 reference row
    with ResultStore(store_path) as store:  # run again: every row is found, none made twice
        rows = run_work(works[0], store)
        assert [row["created_at"] for row in rows] == list(
            frame.set_index("key").loc[[r["key"] for r in rows]]["created_at"]
        )


def test_an_unregistered_config_is_refused_by_name() -> None:
    @dataclass(frozen=True)
    class Unknown:
        method: ClassVar[str] = "unknown"

    with pytest.raises(
        QuarlError,
        match="no method handles a Unknown: expected the config of a registered method, one of ptq, .*constant",
    ):
        handler(Unknown())


GRID = """
name: constant_study
method: {method}
episodes: 3
seeds: [4]
grid:
  - {{algos: [ppo], envs: [CartPole-v1], precisions: [8, 4]}}
"""


def test_a_registered_method_runs_from_a_grid_and_the_report_names_its_rows(cli, tmp_path: Path) -> None:
    grid, store = tmp_path / "constant.yaml", tmp_path / "quarl.sqlite"
    grid.write_text(GRID.format(method="constant"))
    code, out, err = cli("sweep", grid, "--workers", "1", "--store", store, "--cache", tmp_path / "cache")
    assert code == 0, err
    with ResultStore(store) as opened:
        frame = opened.to_dataframe()
    assert sorted(zip(frame["precision"], frame["mean_reward"], strict=True)) == [
        ("fp32", 5.0),
        ("int4", 5.0),
        ("int8", 5.0),
    ]  # the fp32 job of both cells is one job, stored once
    code, out, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    assert "no section of its own reads the rows of method constant (3 rows)" in out
    listed = pd.read_csv(tmp_path / "report" / "other_methods.csv")  # in the report before it has a section
    assert sorted(zip(listed["method"], listed["precision"], listed["mean_reward"], strict=True)) == [
        ("constant", "fp32", 5.0),
        ("constant", "int4", 5.0),
        ("constant", "int8", 5.0),
    ]


def test_a_registered_method_runs_from_the_command_line_with_flags_from_its_config(cli, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    code, out, err = cli("method", "constant", "--help")
    assert code == 0 and "--value VALUE" in out and "--precisions PRECISIONS [PRECISIONS ...]" in out
    flags = ("method", "constant", "--value", "7", "--precisions", "fp32", "int4", "--episodes", "2", "--store", store)
    code, out, err = cli(*flags)
    assert code == 0, err
    assert "toy / Constant-v0 (constant)" in out and "7.00 ± 0.00" in out
    with ResultStore(store) as opened:
        frame = opened.to_dataframe()
    assert sorted(zip(frame["precision"], frame["mean_reward"], frame["episodes"], strict=True)) == [
        ("fp32", 7.0, 2),
        ("int4", 7.0, 2),
    ]
    code, _, err = cli("method", "constant", "--value", "x", "--store", store)
    assert code == 2 and err.strip() == "quarl-bench: error: argument --value: bad value 'x': expected a finite number"
    code, _, err = cli("method", "constant", "--store", store)
    assert code == 2 and "--value" in err and len(err.strip().splitlines()) == 1


def test_a_grid_naming_an_unregistered_method_is_one_line(cli, tmp_path: Path) -> None:
    grid, store = tmp_path / "unknown.yaml", tmp_path / "quarl.sqlite"
    grid.write_text(GRID.format(method="nosuch"))
    code, _, err = cli("sweep", grid, "--workers", "1", "--store", store)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "bad method 'nosuch'" in err and "expected a registered method, one of ptq, mixed" in err
    assert "constant" in err and not store.exists()


@dataclass(frozen=True)
class ReplayedConfig(OfAgent):
    """PTQ played again under a name of its own: a method with an evaluator, so certify can play its questions.

    :param specs: the precisions played.
    """

    specs: tuple[QuantSpec, ...] = ()
    method: ClassVar[str] = "replayed"
    spec_flags: ClassVar[tuple[str, ...]] = PTQConfig.spec_flags  # a PTQ variant: PTQ's recipe flags


@register(ReplayedConfig)
class ReplayedHandler(AgentEvaluation):
    pass


@register_evaluator("replayed")
def play_replayed(agent, job: Job, driver: dict, eval_workers: int = 1) -> EvalResult:
    return replace(evaluator("ptq")(agent, replace(job, method="ptq"), driver, eval_workers), job=job)


def test_any_method_with_an_evaluator_is_certified_by_name(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    common = ("certify", "--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--no-hub", "--bits", "int8")
    common += ("--tolerance-abs", "1000", "--max-episodes", "20", "--batch", "10", "--store", store, "--json")
    answers = {}
    for method in ("replayed", "ptq"):
        code, out, err = cli(*common, "--method", method)
        assert code == 0, err
        answers[method] = json.loads(out)["verdicts"][0]
    assert answers["replayed"]["verdict"] == answers["ptq"]["verdict"] == "safe"  # |difference| <= 500 < 1000
    assert answers["replayed"]["mean"] == answers["ptq"]["mean"]  # the same seeded episodes, played by each
    with ResultStore(store) as opened:
        frame, verdicts = opened.to_dataframe(), opened.verdicts()
    assert len(verdicts) == 2  # two questions: played by each method
    int8 = frame[frame["precision"] == "int8"]
    assert sorted(int8["method"]) == ["ptq", "replayed"]  # one batch each (decided after it), stored under its method
    code, _, err = cli(*common, "--method", "qat")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "bad method 'qat' for certify: expected one with an evaluator of its own" in err and "replayed" in err


@dataclass(frozen=True)
class CrippledConfig(OfAgent):
    """A method that plays every questioned policy at int2, whatever width it is asked: its verdicts differ from
    PTQ's on the same agent, width and episodes.

    :param specs: the precisions asked.
    """

    specs: tuple[QuantSpec, ...] = ()
    method: ClassVar[str] = "crippled"


@register(CrippledConfig)
class CrippledHandler(AgentEvaluation):
    pass


@register_evaluator("crippled")
def play_crippled(agent, job: Job, driver: dict, eval_workers: int = 1) -> EvalResult:
    int2 = replace(job, method="ptq", spec=QuantSpec("int2"))
    return replace(evaluator("ptq")(agent, int2, driver, eval_workers), job=job)


def test_two_methods_certified_on_one_agent_give_two_lines_and_two_minimums(cli, zoo: Path, tmp_path: Path) -> None:
    store, out_dir = tmp_path / "quarl.sqlite", tmp_path / "report"
    common = ("certify", "--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--no-hub", "--bits", "fp16", "int8")
    common += ("--store", store, "--json")
    minimums = {}
    for method in ("ptq", "crippled"):
        code, out, err = cli(*common, "--method", method)
        assert code == 0, err
        minimums[method] = json.loads(out)["minimum_safe"]
    assert minimums == {"ptq": "int8", "crippled": None}  # int2 played in place of fp16: unsafe at the first width
    code, _, err = cli("report", "--store", store, "--out", out_dir)
    assert code == 0, err
    lines = pd.read_csv(out_dir / "certified_verdicts.csv")
    assert sorted(lines["method"]) == ["crippled", "ptq"]  # one line per method, never one merged line
    by_method = lines.set_index("method")
    assert by_method.loc["ptq", "certified minimum"] == "≤ int8"  # the narrowest width asked
    assert by_method.loc["crippled", "certified minimum"] == "> fp16"
    assert by_method.loc["ptq", "int8"].startswith("safe") and by_method.loc["crippled", "fp16"].startswith("unsafe")
    with ResultStore(store) as opened:
        verdicts = opened.verdicts()
    for method, line in by_method.iterrows():  # each line's rows are its own method's verdicts' rows only
        own = {
            key
            for fields, rows in zip(verdicts["spec_json"], verdicts["rows"], strict=True)
            for key in rows
            if fields.get("method", "ptq") == method
        }
        assert set(line["rows"].split()) == own
    widths = pd.read_csv(out_dir / "methods_safe_width.csv")
    # the per-method table keeps them apart: crippled's walk stopped at fp16, PTQ's went on to int8
    assert {"RTN", "fp16", "fp16 (crippled)"} <= set(widths.columns) and "RTN (crippled)" not in widths.columns
    assert widths["fp16 (crippled)"].iloc[0] == "unsafe" and widths["fp16"].iloc[0] == "safe"


REFUSED = {  # built-in methods the generated command cannot build, and why
    "mixed": "has no config of its own: run `quarl-bench mixed`",
    "random": "has no config of its own: its jobs are played within other methods' works",
    "harden": "needs its recipe (Recipe), which no flag gives",
}
FLAGS = {  # what each built-in method's generated command takes, from its config's field types
    "ptq": ("--algo", "--folder", "--bits P [P ...]", "--act-bits"),  # AgentRef, tuple[QuantSpec, ...]
    "deploy": ("--algo", "--backend", "--calibration-states"),  # tuple[DeployTarget, ...]
    "fidelity": ("--bits P [P ...]", "--threshold THRESHOLD"),
    "qat": ("--precision PRECISION", "--quant-delay", "--quantize-activations"),  # str, int | None, bool
    "amp": ("--arch ARCH", "--dtype DTYPE", "--n-timesteps"),
    "rollout": ("--correction", "--cap CAP", "--episodes EPISODES"),
    "actorq": ("--policy-arch POLICY_ARCH [POLICY_ARCH ...]", "--target-reward", "--env ENV"),  # tuple[int, ...]
}


@pytest.mark.parametrize(
    "name", ["ptq", "mixed", "random", "deploy", "qat", "amp", "rollout", "actorq", "fidelity", "harden"]
)
def test_every_built_in_method_is_reached_by_the_method_command_or_refused_in_one_line(cli, name: str) -> None:
    code, out, err = cli("method", name, "--help")
    if name in REFUSED:
        assert code == 2 and err.strip() == f"quarl-bench: error: method {name!r} {REFUSED[name]}" + (
            ": run it from Python or its own command" if name == "harden" else ""
        )
    else:
        assert code == 0, err
        assert all(flag in out for flag in FLAGS[name]), out
        assert "--store" in out and "--executor {local,ray}" in out


def test_the_method_command_offers_only_the_spec_flags_a_method_applies(cli) -> None:
    code, crippled, err = cli("method", "crippled", "--help")  # plays int2 whatever it is asked: takes no recipe
    assert code == 0, err
    assert "--bits P [P ...]" in crippled
    assert not any(flag in crippled for flag in ("--act-bits", "--ptq", "--prune", "--granularity", "--symmetric"))
    code, _, err = cli("method", "crippled", "--algo", "dqn", "--env", "CartPole-v1", "--bits", "8", "--act-bits", "8")
    assert code == 2 and "unrecognized arguments: --act-bits 8" in err  # refused before any agent is loaded
    code, replayed, err = cli("method", "replayed", "--help")  # a PTQ variant: PTQ's flags
    assert code == 0 and all(flag in replayed for flag in ("--act-bits", "--ptq", "--prune", "--granularity"))


@pytest.mark.parametrize("name", ["ptq", "deploy", "qat", "amp", "rollout", "actorq", "fidelity", "harden"])
def test_every_registered_handler_says_where_it_runs_and_where_its_rows_go(name: str) -> None:
    from quarl_bench.methods.protocol import config_type

    method = handler(config_type(name))
    assert method.ray in ("any node", "this machine", "none") and method.table in ("results", "fidelity", "hardened")


@pytest.mark.ray
def test_a_side_table_method_runs_on_ray_from_the_method_command(cli, zoo: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    store = tmp_path / "quarl.sqlite"
    agent = ("--algo", "ppo", "--env", "CartPole-v1", "--folder", zoo, "--no-hub")
    code, out, err = cli(
        "method", "fidelity", *agent, "--bits", "6", "--episodes", "5", "--executor", "ray", "--store", store
    )
    assert code == 0, err
    with ResultStore(store) as opened:
        rows = opened.fidelity()
    assert sorted(rows["precision"]) == ["fp32", "int6"] and (rows["episodes"] == 5).all()  # stored by the driver
