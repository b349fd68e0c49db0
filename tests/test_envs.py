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
    ],
)
def test_names_resolve_to_runnable_ids(name: str, env_id: str) -> None:
    assert resolve_env_id(name) == env_id


def test_legacy_ids_are_searched_for_saved_agents() -> None:
    assert saved_env_ids("LunarLanderContinuous-v3") == ["LunarLanderContinuous-v3", "LunarLanderContinuous-v2"]


def test_unknown_env_names_the_value_and_the_aliases() -> None:
    with pytest.raises(QuarlError, match=r"unknown env 'NoSuchEnv-v9'.*Breakout"):
        resolve_env_id("NoSuchEnv-v9")


def test_env_kinds_choose_parallel_envs() -> None:
    assert env_kind("BreakoutNoFrameskip-v4") == "atari"
    assert env_kind("HopperBulletEnv-v0") == "bullet"
    assert default_eval_envs("CartPole-v1") == 50
