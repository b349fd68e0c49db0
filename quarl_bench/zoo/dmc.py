"""DeepMind Control Suite tasks as gymnasium envs with flat float32 observations: ``dmc/{domain}-{task}-v0``.

dm_control's tasks come through shimmy (``dm_control/{domain}-{task}-v0``, dict observations of float64 arrays);
SB3's MLP policies and ActorQ's actors want one flat vector, so each suite task is registered again under ``dmc/``
with the dict flattened (keys in dm_control's order) and cast to float32. Importing this module registers them,
which is how rl-zoo3's trainer subprocess (``--gym-packages quarl_bench.zoo.dmc``) and Ray workers find them.
Nothing renders: ``MUJOCO_GL`` defaults to ``disable`` so no display or GL library is needed.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

from quarl_bench.zoo.ids import DMC_PREFIX as PREFIX

os.environ.setdefault("MUJOCO_GL", "disable")  # before dm_control is imported: it picks a GL backend on import

SHIMMY_PREFIX = "dm_control/"


def suite_tasks() -> list[tuple[str, str]]:
    """(domain, task) of every Control Suite benchmark task, or [] when dm_control is not installed."""
    try:
        from dm_control import suite
    except ImportError:
        return []
    return list(suite.ALL_TASKS)


def make_flat(**kwargs: Any) -> gym.Env:
    """shimmy's env for ``kwargs["dm_control_id"]`` with its dict observation flattened to one float32 vector; the
    other ``kwargs`` go to shimmy's env."""
    from gymnasium.wrappers import DtypeObservation, FlattenObservation

    dm_control_id = kwargs.pop("dm_control_id")
    env = gym.make(dm_control_id, disable_env_checker=True, **kwargs)
    return DtypeObservation(FlattenObservation(env), np.float32)


def register_dmc_envs() -> None:
    """Register ``dmc/{domain}-{task}-v0`` for each suite task (idempotent)."""
    tasks = suite_tasks()
    if not tasks:
        return
    import shimmy

    gym.register_envs(shimmy)
    for domain, task in tasks:
        name = f"{domain}-{task}-v0"
        if PREFIX + name not in gym.registry and SHIMMY_PREFIX + name in gym.registry:
            gym.register(PREFIX + name, entry_point=make_flat, kwargs={"dm_control_id": SHIMMY_PREFIX + name})


def dmc_env_id(name: str) -> str | None:
    """``dmc/cartpole-balance-v0`` for ``cartpole-balance``, ``cartpole-balance-v0`` or ``dm_control/cartpole-balance-v0``;
    None when the name is no suite task."""
    task = name.removeprefix(SHIMMY_PREFIX).removeprefix(PREFIX)
    task = task if task.endswith("-v0") else f"{task}-v0"
    return PREFIX + task if PREFIX + task in gym.registry else None


register_dmc_envs()
