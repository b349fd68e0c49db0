"""Calibration states: observations the fp32 agent visits, on envs seeded apart from every evaluation seed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
from stable_baselines3.common.policies import BasePolicy

from quarl_bench.errors import QuarlError
from quarl_bench.types import CALIBRATION_SEED

CALIBRATION_ENVS = 10  # fixed, so a calibration set does not depend on how many envs an evaluation plays


def visited_states(policy: BasePolicy, make_env: Callable, count: int) -> np.ndarray:
    """The first ``count`` observations (as the policy receives them: normalised where the agent normalises) that the
    deterministic fp32 ``policy`` meets on ``CALIBRATION_ENVS`` envs seeded ``CALIBRATION_SEED + i``, all envs each
    step."""
    env = make_env(min(CALIBRATION_ENVS, count), CALIBRATION_SEED)
    try:
        observations = env.reset()
        if isinstance(observations, dict):
            raise QuarlError("calibration states: dict observations are not supported; expected a Box observation")
        states = []
        while sum(len(batch) for batch in states) < count:
            states.append(np.asarray(observations).copy())
            actions, _ = policy.predict(observations, deterministic=True)
            observations, _, _, _ = env.step(actions)
    finally:
        env.close()
    return np.concatenate(states)[:count]


def states_hash(states: np.ndarray) -> str:
    """A content hash of a calibration set (stored with every row calibrated on it)."""
    return hashlib.sha256(np.ascontiguousarray(states, dtype=np.float32).tobytes()).hexdigest()[:16]
