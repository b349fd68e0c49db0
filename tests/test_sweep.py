"""Registry expansion and resumable sweeps (a sweep process really killed mid-way, then re-run)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from quarl_bench.api.reproduce import AGENT_OVERHEAD_SECONDS, episode_seconds, work_seconds
from quarl_bench.config import config_dir
from quarl_bench.jobs.grids import load_study, select
from quarl_bench.run.runner import AgentSources, plan
from quarl_bench.store import ResultStore
from quarl_bench.store.results import load_results

SWEETSPOT_PRECISIONS = 17  # fp32, fp16 and 30, 28, ..., 2 bits


def test_sweetspot_grid_expands_to_every_bit_width() -> None:
    study = load_study(config_dir() / "sweetspot.yaml")
    cells = select(study.cells, algos=["ppo"], envs=["CartPole"])
    assert len(cells) == SWEETSPOT_PRECISIONS
    assert [c.precision for c in cells][:4] == ["fp32", "fp16", "int30", "int28"]
    assert cells[-1].precision == "int2" and {c.episodes for c in cells} == {100}
    assert len(select(study.cells, precisions=["8"])) == len({(c.algo, c.env_id) for c in study.cells})


def test_ptq_table_lists_missing_agents_as_skipped(zoo: Path, tmp_path: Path) -> None:
    study = load_study(config_dir() / "ptq_table.yaml")
    with ResultStore(tmp_path / "s.sqlite") as store:
        works, skipped, done = plan(list(study.cells), AgentSources(zoo, tmp_path / "cache"), store, 2, False, {})
    reasons = {(s.algo, s.env_id): s.reason for s in skipped}
    assert "no td3 agent for Pendulum-v1" in reasons[("td3", "Pendulum-v1")]
    assert ("a2c", "BreakoutNoFrameskip-v4") in reasons  # the shared zoo has Atari configs, one PPO Breakout zip
    assert ("ppo", "BreakoutNoFrameskip-v4") not in reasons
    agents = {(w.algo, w.env_id) for w in works}
    assert agents >= {("ppo", "CartPole-v1"), ("dqn", "LunarLander-v3"), ("ppo", "BreakoutNoFrameskip-v4")}
    assert done == 0
    # fp32, fp16, int8 of one agent over 2 workers: the fp32 reference is evaluated by exactly one work
    ppo_cartpole = [w for w in works if (w.algo, w.env_id) == ("ppo", "CartPole-v1")]
    assert sorted(len(w.config.specs) for w in ppo_cartpole) == [1, 1]
    assert sorted(len(w.skip) for w in ppo_cartpole) == [1, 2]  # 3 jobs: each work skips the other's
    # the sweep's progress weighs each work by its own jobs: the shared fp32 episodes count once (its ETA was 35% long)
    with ResultStore(tmp_path / "s.sqlite") as store:
        shares = sum(work_seconds(w, store, {}) for w in ppo_cartpole)
        assert shares == pytest.approx(2 * AGENT_OVERHEAD_SECONDS + 3 * 100 * episode_seconds("CartPole-v1"))


def test_bad_grid_values_are_reported(tmp_path: Path) -> None:
    grid = tmp_path / "bad.yaml"
    grid.write_text("grid:\n  - algos: [ppo]\n    envs: [CartPole]\n    precisions: [fp32, 1]\n")
    with pytest.raises(Exception, match="bad precision '1'"):
        load_study(grid)


def count_rows(store: Path) -> int:
    if not store.exists():
        return 0
    with sqlite3.connect(store, timeout=30) as connection:
        try:
            return connection.execute("SELECT count(*) FROM results").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


KILL_HOOK = Path(__file__).with_name("kill_hook.py")


@pytest.mark.slow
def test_killed_sweep_resumes_and_stores_every_job_once(zoo: Path, tmp_path: Path) -> None:
    """Killed (SIGKILL) right after its 5th stored row, whatever the machine's speed; the rerun stores the rest."""
    store = tmp_path / "quarl.sqlite"
    exe = Path(sys.executable).with_name("quarl-bench")
    arguments = [
        "sweep",
        config_dir() / "sweetspot.yaml",
        "--algo",
        "ppo",
        "a2c",
        "--env",
        "CartPole",
        "Acrobot",
        "-n",
        "10",
        "--workers",
        "1",  # rows are stored by the process that dies
        "--folder",
        zoo,
        "--cache",
        tmp_path / "cache",
        "--store",
        store,
    ]
    killed = subprocess.run([sys.executable, KILL_HOOK, "5", *map(str, arguments)], capture_output=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL
    partial = count_rows(store)
    assert partial == 5

    command = [exe, *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"{partial} already stored" in done.stdout.replace("\n", " ")
    frame = load_results(store)
    assert len(frame) == 4 * SWEETSPOT_PRECISIONS and frame["key"].is_unique
    quantized = frame[frame.precision != "fp32"]
    assert quantized["E %"].notna().all()  # E% filled whichever of fp32/quantized was stored first


@pytest.mark.slow
@pytest.mark.ray
def test_sweep_on_a_local_ray_cluster(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = ("sweep", config_dir() / "smoke.yaml", "--algo", "ppo", "--executor", "ray", "-n", "3")
    code, out, err = cli(*args, "--folder", zoo, "--cache", tmp_path / "cache", "--store", store)
    assert code == 0, err
    frame = load_results(store)
    assert sorted(frame["precision"]) == ["fp16", "fp32", "int4", "int8"]
    assert frame["key"].is_unique and (frame["mean_reward"] == 500.0).all()


def test_grid_blocks_sweep_spec_options(tmp_path: Path) -> None:
    grid = tmp_path / "options.yaml"
    grid.write_text(
        "grid:\n  - algos: [dqn]\n    envs: [CartPole]\n    precisions: [fp32, fp16, 4]\n"
        "    symmetric: [false, true]\n    layers: quarl-code\n"
    )
    specs = [(c.precision, c.spec.symmetric, c.spec.layers) for c in load_study(grid).cells]
    # fp32 and fp16 have no grid: their symmetric variants are the same computation, kept once
    assert specs == [
        ("fp32", False, "paper"),
        ("fp16", False, "quarl-code"),
        ("int4", False, "quarl-code"),
        ("int4", True, "quarl-code"),
    ]
    grid.write_text("grid:\n  - algos: [dqn]\n    envs: [CartPole]\n    precisions: [8]\n    layers: [everything]\n")
    with pytest.raises(Exception, match="bad layers 'everything'.*paper, quarl-code"):
        load_study(grid)


def test_sweep_with_eval_seeds_and_the_random_baseline(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    code, out, err = cli(
        "sweep",
        config_dir() / "smoke.yaml",
        "--algo",
        "a2c",
        "--bits",
        "8",
        "-n",
        "4",
        "--eval-seeds",
        "3",
        "4",
        "--random-baseline",
        "--workers",
        "2",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert code == 0, err + out
    frame = load_results(store)
    jobs = sorted(zip(frame["method"], frame["precision"], frame["seed"], strict=True))
    assert jobs == [(m, p, s) for m, p in (("ptq", "fp32"), ("ptq", "int8"), ("random", "fp32")) for s in (3, 4)]
    random_rows = frame[frame["method"] == "random"]
    assert (
        random_rows["mean_reward"] < -400
    ).all()  # random rarely swings Acrobot up in 500 steps; the zoo's a2c ~ -80
    fp32 = frame[(frame["method"] == "ptq") & (frame["precision"] == "fp32")]
    assert (fp32["mean_reward"] > -150).all()


def test_agents_a_sweep_skips_are_one_line_per_reason() -> None:
    """ptq_table once printed 32 multi-line "skipped" messages before its plan: the agents are listed once per
    reason, and where the sources looked is said once."""
    from quarl_bench.commands.sweep import skipped_lines
    from quarl_bench.run.runner import Skipped

    def missing(algo: str, env: str) -> Skipped:
        looked = (
            f"looked in /zoo/{algo}/{env}_*/{env}.zip; cache results/agents; pass --folder DIR or --train-if-missing"
        )
        return Skipped(algo, env, f"no {algo} agent for {env}: {looked}")

    lines = skipped_lines([missing("a2c", "PongNoFrameskip-v4"), missing("dqn", "PongNoFrameskip-v4")])
    assert lines == [
        "[yellow]skipped 2[/] (looked in the folder; cache results/agents; pass --folder DIR or --train-if-missing): "
        "a2c/PongNoFrameskip-v4, dqn/PongNoFrameskip-v4"
    ]


QAT_GRID = """
name: qat_on_ray
method: qat
episodes: 2
n_timesteps: 1024
seeds: [0]
grid:
  - {algos: [ppo], envs: [CartPole-v1], precisions: [8]}
"""


@pytest.mark.ray
def test_a_training_grid_runs_on_a_local_ray_cluster_and_is_refused_on_a_remote_one(cli, tmp_path: Path) -> None:
    """QAT trains into the driver's agent cache: a Ray cluster on this machine shares the disk, a remote one would
    leave the agent on another node."""
    pytest.importorskip("ray")
    grid, store, cache = tmp_path / "qat.yaml", tmp_path / "quarl.sqlite", tmp_path / "cache"
    grid.write_text(QAT_GRID)
    common = ("sweep", grid, "--store", store, "--cache", cache)
    code, _, err = cli(*common, "--executor", "ray", "--address", "127.0.0.1:1")
    assert code == 2 and len(err.strip().splitlines()) == 1 and not store.exists()
    assert "qat works train into this machine's agent cache: run them on a local Ray cluster" in err
    code, _, err = cli(*common, "--executor", "ray")
    assert code == 0, err
    with ResultStore(store) as opened:
        frame = opened.to_dataframe()
    assert sorted(zip(frame["method"], frame["precision"], strict=True)) == [("qat", "fp32"), ("qat", "int8")]
    assert list(cache.glob("qat/int8-*/ppo/CartPole-v1_1/CartPole-v1.zip"))  # trained into the driver's cache
