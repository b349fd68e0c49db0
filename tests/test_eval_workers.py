"""One evaluation loop (SB3's counting and order) with per-env draws: ``--eval-workers`` plays the very episodes one
process plays, sampled and epsilon-greedy actions and observation noise included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stable_baselines3.common.evaluation import evaluate_policy

from quarl_bench.action_modes import ActionMode
from quarl_bench.evaluation.episode_seeds import seed_every_episode
from quarl_bench.evaluation.evaluate import Finished, evaluate, sampled_actions
from quarl_bench.evaluation.workers import env_shares, evaluate_in_workers, merged_sample
from quarl_bench.quant.quantize import quantize
from quarl_bench.types import QuantSpec
from quarl_bench.zoo.agents import resolve_agent
from quarl_bench.zoo.forms import load_agent


def test_inverse_cdf_draws_hand_computed_actions() -> None:
    probs = np.array([[0.25, 0.5, 0.25]] * 5 + [[0.5, 0.0, 0.5]] * 2)
    uniforms = np.array([0.1, 0.25, 0.74, 0.75, 0.99, 0.49, 0.5])
    assert sampled_actions(probs, uniforms).tolist() == [0, 1, 1, 2, 2, 0, 2]


def test_envs_are_split_into_contiguous_near_equal_shares() -> None:
    assert env_shares(8, 2) == [range(0, 4), range(4, 8)]
    assert env_shares(5, 2) == [range(0, 3), range(3, 5)]
    assert env_shares(2, 4) == [range(0, 1), range(1, 2)]


def test_merged_sample_takes_from_each_share_as_a_uniform_sample_would() -> None:
    shares = [Finished([], {}, np.full((40, 1), k), 1, seen) for k, seen in enumerate((100, 300))]
    merged = merged_sample(shares, capacity=40, seed=0)
    assert merged.shape == (40, 1)
    assert 3 <= int(np.sum(merged == 0)) <= 18  # hypergeometric: 10 expected from the share that saw 100 of 400
    few = [Finished([], {}, np.zeros((30, 1)), 1, 30), Finished([], {}, np.ones((5, 1)), 1, 5)]
    assert np.sort(merged_sample(few, capacity=40, seed=0), axis=0).tolist() == [[0.0]] * 30 + [[1.0]] * 5


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "env_id"), [("dqn", "Acrobot-v1"), ("a2c", "Pendulum-v1")])
def test_evaluation_loop_plays_sb3s_episodes_in_sb3s_order(zoo: Path, algo: str, env_id: str) -> None:
    agent = load_agent(resolve_agent(algo, env_id, zoo, use_hub=False))
    ours = evaluate(agent.model.policy, agent.make_env(3, seed=5), 7, seed=5)
    theirs = agent.make_env(3, seed=5)
    seed_every_episode(theirs, 5, range(3))  # SB3's loop on the same per-episode reset seeds
    rewards, lengths = evaluate_policy(agent.model.policy, theirs, 7, return_episode_rewards=True)
    assert (ours.rewards, ours.lengths) == (list(rewards), list(lengths))
    assert len(set(ours.rewards)) == 7  # seven different episodes, not one start replayed


@pytest.mark.slow
def test_workers_play_one_process_episodes_with_noise_and_agreement(zoo: Path) -> None:
    agent = load_agent(resolve_agent("ppo", "CartPole-v1", zoo, use_hub=False))
    policy, _ = quantize(agent.model.policy, QuantSpec(4))
    settings = {"actions": ActionMode(), "reference": agent.model.policy, "obs_noise": 0.3, "record_states": 50}
    one = evaluate(policy, agent.make_env(6, seed=2), 9, seed=2, **settings)
    split = evaluate_in_workers(policy, agent.make_env, 6, 2, 9, seed=2, **settings)
    assert (split.rewards, split.lengths) == (one.rewards, one.lengths)
    assert split.agreement == one.agreement and one.agreement["action_agreement"] < 1.0
    assert split.states.shape == one.states.shape == (50, 4)
    quiet = evaluate(policy, agent.make_env(6, seed=2), 9, seed=2)
    assert quiet.lengths != one.lengths  # the noise reached the policy


@pytest.mark.slow
def test_workers_play_one_process_epsilon_greedy_episodes(zoo: Path) -> None:
    agent = load_agent(resolve_agent("dqn", "CartPole-v1", zoo, use_hub=False))
    mode = ActionMode("epsilon-greedy", 0.2)
    one = evaluate(agent.model.policy, agent.make_env(4, seed=0), 4, seed=0, actions=mode)
    split = evaluate_in_workers(agent.model.policy, agent.make_env, 4, 2, 4, seed=0, actions=mode)
    assert (split.rewards, split.lengths) == (one.rewards, one.lengths)
    assert min(one.rewards) < 500  # greedy plays 500 every time; exploring costs it


@pytest.mark.slow
def test_workers_play_one_process_sampled_atari_episodes(zoo: Path) -> None:
    agent = load_agent(resolve_agent("ppo", "BreakoutNoFrameskip-v4", zoo, use_hub=False))
    mode = ActionMode("sampled")
    one = evaluate(agent.model.policy, agent.make_env(2, seed=0), 2, seed=0, actions=mode)
    split = evaluate_in_workers(agent.model.policy, agent.make_env, 2, 2, 2, seed=0, actions=mode)
    assert (split.rewards, split.lengths) == (one.rewards, one.lengths)
    again = evaluate(agent.model.policy, agent.make_env(2, seed=0), 2, seed=0, actions=mode)
    assert (again.rewards, again.lengths) == (one.rewards, one.lengths)


@pytest.mark.slow
def test_run_with_eval_workers_stores_the_rows_of_one_process(cli, zoo: Path, tmp_path: Path) -> None:
    from quarl_bench.store.results import load_results

    rows = {}
    for workers in ("1", "2"):
        store = tmp_path / f"workers{workers}.sqlite"
        code, _, err = cli(
            "run",
            "--algo",
            "a2c",
            "--env",
            "Acrobot",
            "--bits",
            "4",
            "-n",
            "7",
            "--n-envs",
            "3",
            "--eval-workers",
            workers,
            "--folder",
            zoo,
            "--store",
            store,
        )
        assert code == 0, err
        rows[workers] = load_results(store).set_index("precision")
    for precision in ("fp32", "int4"):
        one, split = rows["1"].loc[precision], rows["2"].loc[precision]
        assert one["episode_rewards"] == split["episode_rewards"] and len(one["episode_rewards"]) == 7
    assert rows["1"].loc["int4", "fixed_flip_rate"] == rows["2"].loc["int4", "fixed_flip_rate"]
    assert rows["1"].loc["int4", "action_agreement"] == rows["2"].loc["int4", "action_agreement"]


def test_a_pool_worker_prints_notes_where_the_cli_does(capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A long evaluation's heartbeat is a note written in the worker: a spawned worker of a CLI run prints it (it
    once went nowhere, and reproduce was silent for minutes over 100 Atari games)."""
    from quarl_bench.errors import note, show_notes
    from quarl_bench.run.executors import PoolExecutor

    show_notes()  # as the CLI does
    executor = PoolExecutor(tmp_path / "q.sqlite", 1)
    try:
        executor.pool.submit(note, "evaluating: 3 of 100 episodes in 1m00s").result(timeout=120)
    finally:
        executor.pool.shutdown()
    assert "quarl-bench: evaluating: 3 of 100 episodes in 1m00s" in capfd.readouterr().err


def test_a_note_inside_silenced_native_output_still_reaches_stderr() -> None:
    """Evaluations run with file descriptor 2 sent to /dev/null (pybullet prints from C); the heartbeat written
    inside went there too, so a CLI run over 100 Atari games was silent for minutes. A real process: pytest's
    capture has no file descriptor to silence."""
    import subprocess
    import sys

    code = (
        "import os\n"
        "from quarl_bench.errors import note, show_notes\n"
        "from quarl_bench.zoo.quiet import native_output_silenced\n"
        "show_notes()\n"
        "with native_output_silenced():\n"
        "    os.write(2, b'argv[0]=\\n')\n"  # what C code prints: still silenced
        "    note('evaluating: 40 of 100 episodes in 1m00s')\n"
        "note('after')\n"
    )
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stderr
    assert err.splitlines() == ["quarl-bench: evaluating: 40 of 100 episodes in 1m00s", "quarl-bench: after"]
