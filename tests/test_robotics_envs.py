"""gymnasium-robotics' MuJoCo Fetch tasks: made on quarl-bench's mujoco pin, their dynamics randomised through the
model (masses, frictions) and the arm's gain, their goal and object ranges widened in x and y."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from quarl_bench.perturbations import parse_perturbation

pytest.importorskip("gymnasium_robotics")


def _perturbed(env_id: str, condition: str, seed: int):
    import gymnasium as gym

    from quarl_bench.evaluation.perturbations import PerturbedEnv, condition_for
    from quarl_bench.zoo.envs import resolve_env_id

    env_id = resolve_env_id(env_id)
    venv = DummyVecEnv([lambda: gym.make(env_id)])
    venv.seed(seed)
    return PerturbedEnv(venv, parse_perturbation(condition_for(condition, env_id)), 0, None)


def test_fetch_reach_makes_and_resets_by_its_id_alone() -> None:
    """FetchReach-v4 by its id (no package named): gymnasium-robotics 1.4.2 fails an assertion as it builds the arm on
    mujoco 3.17 unless its joint types are read as ints; two resets of one seed draw the same goal."""
    import gymnasium as gym

    from quarl_bench.zoo.envs import resolve_env_id

    env_id = resolve_env_id("FetchReach-v4")
    goals = [gym.make(env_id).reset(seed=3)[0]["desired_goal"] for _ in range(2)]
    assert np.array_equal(goals[0], goals[1])
    assert goals[0].shape == (3,)


def test_body_mass_scales_every_body_of_a_fetch_arm_per_episode() -> None:
    env = _perturbed("FetchPush-v4", "body_mass=0.5", seed=1)
    nominal = env.nominal[0]["body_mass"]
    env.reset()
    masses = []
    for _ in range(3):  # an episode is 50 steps; the vectorised env resets itself after each
        masses.append(np.array(env.bases[0].model.body_mass))
        for _ in range(50):
            env.step(np.zeros((1, 4)))
    ratios = [mass[nominal > 0] / nominal[nominal > 0] for mass in masses]
    for ratio in ratios:  # one factor for every body, in [0.5, 1.5], a new one each episode
        assert np.allclose(ratio, ratio[0]) and 0.5 <= ratio[0] <= 1.5
    assert len({round(float(ratio[0]), 6) for ratio in ratios}) == 3
    env.close()


def test_actuator_gear_on_a_fetch_arm_scales_how_far_one_action_moves_it() -> None:
    """The arm follows a mocap target: a gain of g moves the gripper g times as far for the same action."""
    moved = {}
    for spread in (0.0, 0.9):
        env = _perturbed("FetchReach-v4", f"actuator_gear={spread}", seed=2)
        start = env.reset()["achieved_goal"][0].copy()
        for _ in range(5):
            observation, *_ = env.step(np.array([[1.0, 0.0, 0.0, 0.0]]))
        moved[spread] = observation["achieved_goal"][0][0] - start[0]
        gain = float(getattr(env.bases[0], "_mocap_gain", [1.0])[0])  # nominal (s = 0): the env as made
        env.close()
    assert 0.1 <= gain <= 1.9 and abs(gain - 1) > 0.05
    assert moved[0.9] == pytest.approx(moved[0.0] * gain, rel=0.15)


def test_wider_starts_on_a_fetch_task_widen_its_goals_in_x_and_y_only() -> None:
    """init-spread=1 on FetchPush: the goals' spread about the gripper's start doubles in x and y, z stays the
    table's height; the object's range doubles; the env's own seeded draw, so two envs of one seed agree."""
    goals = {}
    for condition in ("init-spread=0", "init-spread=1"):
        env = _perturbed("FetchPush-v4", condition, seed=5)
        goals[condition] = np.array([env.reset()["desired_goal"][0] for _ in range(150)])
        obj_range = env.bases[0].obj_range
        env.close()
    assert obj_range == pytest.approx(0.30)
    narrow, wide = goals["init-spread=0"], goals["init-spread=1"]
    assert np.ptp(narrow[:, :2], axis=0).max() <= 0.30 < np.ptp(wide[:, :2], axis=0).min()
    assert np.allclose(wide[:, 2], narrow[0, 2])
    again = _perturbed("FetchPush-v4", "init-spread=1", seed=5)
    assert np.array_equal(again.reset()["desired_goal"][0], wide[0])
    again.close()
