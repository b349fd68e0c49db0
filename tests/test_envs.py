"""Env names: aliases, legacy ids, kinds."""

from __future__ import annotations

import pytest

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.envs import default_eval_envs, env_kind, resolve_env_id, saved_env_ids


@pytest.mark.parametrize(
    ("name", "env_id"),
    [
        ("Breakout", "BreakoutNoFrameskip-v4"),
        ("Pong", "PongNoFrameskip-v4"),
        ("CartPole", "CartPole-v1"),
        ("HalfCheetah", "HalfCheetahBulletEnv-v0"),
        ("LunarLander-v2", "LunarLander-v3"),
        ("Acrobot-v1", "Acrobot-v1"),
        ("HalfCheetah-v3", "HalfCheetah-v4"),  # zoo MuJoCo agents were saved on -v3 (mujoco-py)
        ("mujoco/Walker2d", "Walker2d-v4"),
        ("cartpole-balance", "dmc/cartpole-balance-v0"),
        ("dm_control/walker-stand-v0", "dmc/walker-stand-v0"),  # shimmy's dict observations -> flat
        ("humanoid-walk", "dmc/humanoid-walk-v0"),
    ],
)
def test_names_resolve_to_runnable_ids(name: str, env_id: str) -> None:
    assert resolve_env_id(name) == env_id


def test_legacy_ids_are_searched_for_saved_agents() -> None:
    assert saved_env_ids("LunarLanderContinuous-v3") == ["LunarLanderContinuous-v3", "LunarLanderContinuous-v2"]


def test_unknown_env_names_the_value_the_closest_ids_and_the_module_hint() -> None:
    with pytest.raises(QuarlError, match=r"unknown env 'NoSuchEnv-v9'.*--env-package my_module") as raised:
        resolve_env_id("NoSuchEnv-v9")
    assert "did you mean" not in str(raised.value)  # nothing is close
    with pytest.raises(QuarlError, match=r"did you mean 'LunarLander-v3'"):
        resolve_env_id("LunarLandr-v3")
    with pytest.raises(QuarlError, match=r"did you mean 'Breakout'"):  # an alias, case aside
        resolve_env_id("breakout")


def test_env_kinds_choose_parallel_envs() -> None:
    assert env_kind("BreakoutNoFrameskip-v4") == "atari"
    assert env_kind("HopperBulletEnv-v0") == "bullet"
    assert default_eval_envs("CartPole-v1") == 50


def test_control_suite_task_builds_steps_and_resets_offline_with_flat_observations() -> None:
    import gymnasium as gym
    import numpy as np

    env = gym.make(resolve_env_id("cartpole-balance"))
    assert env.observation_space.shape == (5,) and env.observation_space.dtype == np.float32  # position 3 + velocity 2
    first, _ = env.reset(seed=3)
    again, _ = env.reset(seed=3)
    assert first.dtype == np.float32 and np.array_equal(first, again)
    steps, total, truncated = 0, 0.0, False
    while not truncated:
        obs, reward, terminated, truncated, _ = env.step(np.zeros(1))
        assert not terminated and obs.shape == (5,) and 0.0 <= reward <= 1.0
        steps, total = steps + 1, total + reward
    assert steps == 1000 and total > 100  # the suite's 1000-step episodes; a still cart keeps the pole up a while
    walker = gym.make(resolve_env_id("walker-stand"))
    assert walker.observation_space.shape == (24,) and walker.reset(seed=0)[0].shape == (24,)
