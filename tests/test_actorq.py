"""ActorQ end to end on a local Ray cluster: int8 actors, pulls at the pull period, transitions reach the
learner, the breakdown and the store row are written, and a killed actor is restarted without ending the run."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pandas as pd
import pytest
import ray

from quarl_bench.actorq.config import ActorQConfig
from quarl_bench.actorq.driver import actorq_result, run_actorq
from quarl_bench.actorq.exploration import epsilons
from quarl_bench.actorq.metrics import breakdown
from quarl_bench.errors import QuarlError
from quarl_bench.store import ResultStore
from quarl_bench.store.results import load_results

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_epsilon_spread_and_config_validation() -> None:
    spread = epsilons(4)
    assert (
        spread[0] == pytest.approx(0.4)
        and spread[-1] == pytest.approx(0.4**8)
        and spread == sorted(spread, reverse=True)
    )
    with pytest.raises(QuarlError, match="bad actor precision 'int4'"):
        ActorQConfig("CartPole-v1", actor_precision="int4")


def test_short_run_with_a_killed_actor(tmp_path: Path) -> None:
    # The kill comes at the first evaluation after actor 0 registered (evaluations every 0.1 s), while it is
    # collecting: 40k steps take its ~2000-8000 steps/s several seconds. With 20k steps and evaluations every 2 s
    # an idle machine finished both actors before the second evaluation, and nothing was killed in time.
    steps = 40_000
    config = ActorQConfig(
        "CartPole-v1",
        "int8",
        comm_bits=8,
        n_actors=2,
        policy_arch=(64, 64),
        pull_period=500,
        batch_size=64,
        max_actor_steps=steps,
        eval_every_s=0.1,
        eval_episodes=3,
    )
    killed: list[int] = []

    def kill_first_actor_once(point, cluster) -> None:
        pids = ray.get(cluster.quantizer.pids.remote())
        if not killed and 0 in pids:  # at the first evaluation, while the actors are collecting
            pid = pids[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    outcome = run_actorq(config, on_eval=kill_first_actor_once)
    assert killed and outcome.restarts >= 1
    assert len(outcome.actors) == 2 and all(a["int8_weights"] for a in outcome.actors)
    for actor in outcome.actors:
        assert actor["steps"] == steps  # counted over incarnations: the restarted actor went on where it had got
    assert next(a for a in outcome.actors if a["index"] == 1)["pulls"] == steps // 500  # at steps 0, 500, ...
    # never more than the budget: what the killed incarnation had not pushed was lost, not counted
    assert outcome.learner["per_actor"] == {"0": steps, "1": steps} and outcome.learner["inserted"] == 2 * steps
    assert outcome.learner["updates"] > 0
    assert outcome.broadcast_bytes < 4 * (4 * 64 + 64 * 64 + 64 * 2)  # 8-bit broadcasts: ~1 byte per weight
    assert breakdown(outcome.actors)["step"] > 0
    assert outcome.energy["kwh"] > 0 and outcome.energy["source"] in ("hardware counters", "estimate (TDP x CPU load)")
    with ResultStore(tmp_path / "quarl.sqlite") as store:
        store.put(actorq_result(config, outcome))
        row = store.get(actorq_result(config, outcome).job.key)
    frame = load_results(tmp_path / "quarl.sqlite")
    assert list(frame["method"]) == ["actorq"] and row["provenance"]["restarts"] >= 1 and row["provenance"]["curve"]


def test_learner_crash_keeps_what_was_measured(tmp_path: Path) -> None:
    config = ActorQConfig(
        "CartPole-v1",
        "fp16",
        n_actors=1,
        policy_arch=(32,),
        pull_period=200,
        batch_size=32,
        max_actor_steps=1_000_000,
        eval_every_s=1.0,
        eval_episodes=2,
        learning_starts=100,
    )
    seen: list[dict] = []

    def kill_learner_at_second_evaluation(point, cluster) -> None:
        seen.append(point)
        if len(seen) == 2:
            os.kill(ray.get(cluster.learner.pid.remote()), signal.SIGKILL)

    outcome = run_actorq(config, on_eval=kill_learner_at_second_evaluation)
    assert outcome.error is not None and outcome.error.startswith("learner failed: ")
    # the run ended at the learner's death, not by collecting its 1M-step budget (events, not the clock)
    assert len(outcome.curve) >= 2 and outcome.curve[-1]["actor_steps"] < config.max_actor_steps
    with ResultStore(tmp_path / "quarl.sqlite") as store:
        store.put(actorq_result(config, outcome))
        row = store.get(actorq_result(config, outcome).job.key)
    assert row["provenance"]["error"] == outcome.error and len(row["provenance"]["curve"]) == len(outcome.curve)
    # its real last evaluation (2 episodes), not one synthetic episode of the mean
    assert list(row["episode_rewards"]) == outcome.curve[-1]["episodes"] and len(row["episode_rewards"]) == 2
    assert row["agent_hash"] == "" and row["setting"] == config.run_key()  # no agent: the setting has its own field


def test_learner_ingests_while_it_evaluates() -> None:
    """Ordered by events, not clocks: an evaluation far too long to finish in the test (10^6 Pendulum episodes) is
    running, and every add returns and is counted while it still runs."""
    import time

    import numpy as np

    from quarl_bench.actorq.learner import Learner
    from quarl_bench.jobs.ray_cluster import connect

    connect(None)
    try:
        learner = Learner.remote("td3", "Pendulum-v1", [32], 32, 16.0, 0, 10_000)
        batch = tuple(
            np.zeros(shape, dtype)
            for shape, dtype in (
                ((250, 3), np.float32),
                ((250, 3), np.float32),
                ((250, 1), np.float32),
                (250, np.float64),
                (250, bool),
                (250, bool),
            )
        )
        ray.get(learner.add.remote(batch, 0))
        evaluation = learner.evaluate.remote(1_000_000)
        deadline = time.monotonic() + 60  # a bound on waiting for the evaluation to begin, not a premise
        while not ray.get(learner.evaluating.remote()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ray.get(learner.evaluating.remote()) == 1
        for _ in range(5):
            ray.get(learner.add.remote(batch, 1))
        ready, _ = ray.wait([evaluation], timeout=0)
        assert not ready and ray.get(learner.evaluating.remote()) == 1  # the adds returned during the evaluation
        assert ray.get(learner.delivered.remote(1)) == 5 * 250 and ray.get(learner.delivered.remote(0)) == 250
    finally:
        ray.shutdown()


def test_continuous_td3_run_through_the_cli(cli, tmp_path: Path) -> None:
    code, out, err = cli(
        "actorq",
        "--algo",
        "td3",
        "--env",
        "Pendulum",
        "--actor-precision",
        "int8",
        "--n-actors",
        2,
        "--policy-arch",
        "64,64",
        "--max-actor-steps",
        2000,
        "--learning-starts",
        500,
        "--batch-size",
        64,
        "--eval-every",
        3,
        "--store",
        tmp_path / "q.sqlite",
    )
    assert code == 0, err
    assert "int8 weights on actors: True" in " ".join(out.split())
    row = load_results(tmp_path / "q.sqlite").iloc[0]
    prov = row["provenance"]
    assert (row["algo"], row["env_id"], row["method"], row["precision"]) == ("td3", "Pendulum-v1", "actorq", "int8")
    assert prov["actor_steps"] == 4000 and prov["learner"]["inserted"] == 4000 and prov["learner"]["updates"] > 0
    # the learner's policy played 10 full evaluation episodes; Pendulum pays between -16.27 and 0 per step, 200 steps
    assert len(row["episode_rewards"]) == 10 and all(-16.28 * 200 <= r <= 0 for r in row["episode_rewards"])
    fp32_bytes = 4 * (3 * 64 + 64 + 64 * 64 + 64 + 64 * 1 + 1)
    assert prov["broadcast_bytes"] < 0.6 * fp32_bytes  # the quantizer broadcasts the int8 policy it built
    assert sum(actor["seconds"]["quantize"] for actor in prov["actors"]) > 0
    # the actors' int8 policy against the learner's fp32 one, at every pull: a bounded agreement series per actor
    mismatch = prov["mismatch"]
    assert {p["actor"] for p in mismatch} == {0, 1} and all(0.0 <= p["agreement"] <= 1.0 for p in mismatch)
    assert all(p["action_error"] >= 0 for p in mismatch) and min(p["agreement"] for p in mismatch) > 0.5


def test_grid_runs_resume_and_report(cli, tmp_path: Path) -> None:
    grid = tmp_path / "actorq.yaml"
    grid.write_text(
        "settings: {n_actors: 1, policy_arch: [32], pull_period: 250, batch_size: 32, max_actor_steps: 1500,\n"
        "           eval_every_s: 2, eval_episodes: 2, learning_starts: 200}\nseeds: [0, 1]\n"
        "grid:\n  - {algos: [dqn], envs: [CartPole-v1], precisions: [fp32, int8]}\n"
    )
    store = tmp_path / "q.sqlite"
    code, out, err = cli("actorq", "--grid", grid, "--store", store)
    assert code == 0, err
    frame = load_results(store)
    assert sorted(frame["precision"]) == ["fp32", "fp32", "int8", "int8"] and frame["setting"].nunique() == 1
    code, out, _ = cli("actorq", "--grid", grid, "--store", store)
    assert code == 0 and out.count("already in the store, skipped") == 4
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    table = pd.read_csv(tmp_path / "report" / "actorq_speedup.csv").set_index("precision")
    assert table.loc["int8", "seeds"] == 2 and table.loc["int8", "steps/s speed-up"] > 0
    assert table.loc["int8", "steps/s CI"].startswith("[")  # a paired bootstrap interval over the two seeds
    assert table.loc["fp32", "paper speed-up"] == 1.0 and table.loc["int8", "paper speed-up"] == 3.70  # CartPole


def test_rays_own_output_goes_to_a_log_beside_the_store(tmp_path: Path) -> None:
    """The console script, as a user runs it: Ray's core-worker lines (here its warning about actor constructor
    arguments) land in ``quarl.ray.log`` next to the store, and the terminal's stderr stays empty."""
    import subprocess
    import sys

    store = tmp_path / "quarl.sqlite"
    command = [str(Path(sys.executable).with_name("quarl-bench")), "actorq", "--env", "CartPole", "--n-actors", "1"]
    command += ["--actor-precision", "int8", "--max-actor-steps", "1500", "--store", str(store)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and "core_worker" not in done.stdout
    assert "core_worker" in (tmp_path / "quarl.ray.log").read_text()
    assert len(load_results(store)) == 1


def test_a_run_stopped_by_sigterm_keeps_its_curve_on_its_clock_marked_interrupted(tmp_path: Path) -> None:
    """Evaluations every 400 actor steps (a clock that does not depend on the machine's speed); SIGTERM after the
    second one: the command stores the curve so far, marked interrupted, says so and exits 130."""
    import subprocess
    import sys

    store = tmp_path / "q.sqlite"
    command = [sys.executable, "-m", "quarl_bench", "actorq", "--env", "CartPole-v1", "--actor-precision", "int8"]
    command += ["--n-actors", "1", "--policy-arch", "32", "--pull-period", "200", "--batch-size", "32"]
    command += ["--eval-clock", "actor_steps", "--eval-every-count", "400", "--eval-episodes", "2"]
    command += ["--max-actor-steps", "1000000", "--max-seconds", "300", "--store", str(store)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    evaluations = 0
    for line in process.stdout:
        if "actor steps" in line and "updates" in line:
            evaluations += 1
            if evaluations == 2:
                process.send_signal(signal.SIGTERM)
                break
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "interrupted: ActorQ run stopped by SIGTERM" in err and "marked interrupted" in err
    frame = load_results(store)
    prov = frame.iloc[0]["provenance"]
    assert prov["interrupted"] == "SIGTERM" and prov["error"].startswith("interrupted by SIGTERM")
    steps = [point["actor_steps"] for point in prov["curve"]]
    assert len(steps) >= 2 and all(b - a >= 400 for a, b in zip(steps, steps[1:], strict=False))
    from quarl_bench.report.actorq import actorq_runs

    assert actorq_runs(frame).empty  # no speed-up is derived from an interrupted run


def test_runs_side_by_side_share_one_cluster_and_each_stores_its_row(tmp_path: Path) -> None:
    """Two seeds at once, in threads of one driver and one Ray cluster (what --concurrent does where the cores
    hold them): each run stores its own row, and every evaluation names its run."""
    from quarl_bench.api.train import run_actorq_runs

    configs = [
        ActorQConfig(
            "CartPole-v1",
            "int8",
            n_actors=1,
            policy_arch=(32,),
            pull_period=200,
            batch_size=32,
            max_actor_steps=3000,
            eval_every_s=1.0,
            eval_episodes=2,
            learning_starts=100,
            seed=seed,
        )
        for seed in (0, 1)
    ]
    seen: list[str] = []
    rows = run_actorq_runs(
        configs, tmp_path / "q.sqlite", on_eval=lambda point, _: seen.append(point["run"]), concurrent=2
    )
    assert [row["seed"] for row in rows] == [0, 1] and all(row["provenance"]["actor_steps"] == 3000 for row in rows)
    assert {"int8 seed 0", "int8 seed 1"} <= set(seen)
    assert len(load_results(tmp_path / "q.sqlite")) == 2
