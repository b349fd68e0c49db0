"""A perturbation is one registered module (quarl_bench/perturbations/): parsing, ranges, help, refusals and the
wrapper all come from its registration. ``obs-bias`` was added as a new contributor would, one file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quarl_bench.errors import QuarlError
from quarl_bench.perturbations import PERTURBATIONS, kinds, parse_perturbation
from quarl_bench.store import ResultStore


def test_every_kind_says_what_it_touches_and_has_the_hook_for_it() -> None:
    hooks = {"observation": "observe", "action": "act", "reset": "wrap", "dynamics": "write"}
    for kind in kinds():
        assert getattr(kind, hooks[kind.touches]) is not None, kind.name
    names = [kind.name for kind in kinds()]
    assert names[0] == "obs-noise" and {"obs-bias", "obs-delay", "obs-noise-abs", "sticky", "body_mass"} <= set(names)


def test_a_severity_outside_a_kind_s_range_is_refused_naming_the_range() -> None:
    with pytest.raises(QuarlError, match=r"bad severity 11 for obs-bias: expected a severity in \[0, 10\]"):
        parse_perturbation("obs-bias=11")
    with pytest.raises(QuarlError, match="NAME one of obs-noise, .*obs-bias, .*action-noise"):
        parse_perturbation("wind=0.2")


def test_a_perturbation_added_as_one_module_plays_from_the_cli(cli, zoo: Path, tmp_path: Path) -> None:
    """obs-bias: its help line, its rows under their own condition, and fp32's episodes differ from nominal ones."""
    code, out, _ = cli("run", "--help")
    assert code == 0 and "obs-bias (a per-episode offset" in " ".join(out.split()).replace("- ", "-")  # argparse wraps
    store = tmp_path / "q.sqlite"
    agent = ("--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--bits", "8", "-n", "6", "--store", store)
    assert cli("run", *agent)[0] == 0
    code, _, err = cli("run", *agent, "--perturb", "obs-bias=2")
    assert code == 0, err
    with ResultStore(store) as opened:
        rows = opened.to_dataframe()
    fp32 = rows[rows["precision"] == "fp32"].set_index("perturbation")["episode_rewards"]
    assert set(fp32.index) == {"", "obs-bias=2"}
    assert not np.array_equal(fp32[""], fp32["obs-bias=2"])  # a biased sensor changes what fp32 does
    assert "obs-bias" in PERTURBATIONS.sources and PERTURBATIONS.sources["obs-bias"].endswith("observation_bias")


def test_obs_delay_shows_the_policy_the_observation_of_k_steps_before() -> None:
    """Sensor latency, as one module (observation_delay.py): the env runs on time, the policy sees it late; a Dict
    observation's keys alike."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    from quarl_bench.evaluation.perturbations import PerturbedEnv

    def envs() -> DummyVecEnv:
        venv = DummyVecEnv([lambda: gym.make("CartPole-v1")])
        venv.seed(3)
        return venv

    plain = envs()
    late = PerturbedEnv(envs(), parse_perturbation("obs-delay=2"), 0, None)
    truth, seen = [plain.reset()], [late.reset()]
    for _ in range(6):
        truth.append(plain.step(np.array([1]))[0])
        seen.append(late.step(np.array([1]))[0])
    assert np.allclose(seen[0], truth[0]) and np.allclose(seen[1], truth[0])  # the first one until k steps passed
    assert all(np.allclose(seen[t], truth[t - 2]) for t in range(2, 7))
    goal = {"observation": np.zeros((1, 3)), "desired_goal": np.ones((1, 2))}
    delayed = PerturbedEnv(envs(), parse_perturbation("obs-delay=1"), 0, None)
    delayed.reset()
    first = delayed._observed(goal)
    second = delayed._observed({key: value + 1 for key, value in goal.items()})
    assert np.array_equal(first["desired_goal"], goal["desired_goal"]) and np.array_equal(
        second["observation"], goal["observation"]
    )


def test_a_panda_gym_robot_s_masses_frictions_and_motor_forces_are_scaled_per_episode() -> None:
    """PyBullet's dynamics through the same kinds as MuJoCo's: one factor per episode for every link, from the
    episode's own generator, so paired episodes meet the same robot."""
    pytest.importorskip("panda_gym")
    import gymnasium as gym
    import panda_gym  # noqa: F401 - registers the tasks
    from stable_baselines3.common.vec_env import DummyVecEnv

    from quarl_bench.evaluation.perturbations import PerturbedEnv, condition_for
    from quarl_bench.zoo.quiet import native_output_silenced

    condition = condition_for("body_mass=0.5,friction=0.5,actuator_gear=0.3", "PandaReach-v3")
    factors = []
    for _ in range(2):  # two wrappers of one seed: the same draws
        with native_output_silenced():
            env = PerturbedEnv(DummyVecEnv([lambda: gym.make("PandaReach-v3")]), parse_perturbation(condition), 7, None)
        base, nominal = env.bases[0], env.nominal[0]
        env.reset()
        drawn = {}
        for name in ("body_mass", "friction", "actuator_gear"):
            now = PERTURBATIONS.get(name).read(base)
            moved = nominal[name] > 0
            ratio = now[moved] / nominal[name][moved]
            assert np.allclose(ratio, ratio[0], rtol=1e-4) and ratio[0] != 1.0, name  # one factor for every link
            drawn[name] = float(ratio[0])
        assert 0.5 <= drawn["body_mass"] <= 1.5 and 0.7 <= drawn["actuator_gear"] <= 1.3
        factors.append(drawn)
        env.close()
    assert factors[0] == pytest.approx(factors[1], rel=1e-4)
