"""Calibration states: observations the fp32 agent visits, on envs seeded apart from every evaluation seed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
from stable_baselines3.common.policies import BasePolicy

from quarl_bench.types import CALIBRATION_SEED

CALIBRATION_ENVS = 10  # fixed, so a calibration set does not depend on how many envs an evaluation plays
MAX_STEPS_PER_STATE = 20  # at most 20 x count observations are collected before sampling


def visited_states(policy: BasePolicy, make_env: Callable, count: int, seed: int = CALIBRATION_SEED) -> np.ndarray:
    """``count`` observations (as the policy receives them: normalised where the agent normalises) drawn uniformly
    (seeded) from those the deterministic fp32 ``policy`` meets on ``CALIBRATION_ENVS`` envs seeded
    ``CALIBRATION_SEED + i``, played until every env has ended an episode (or ``MAX_STEPS_PER_STATE x count``
    observations): whole episodes, so landings and late-episode states are in the set, not only starts. ``seed``
    replaces ``CALIBRATION_SEED`` for a set of another use (fixed-state fidelity). A recurrent policy carries its
    state through the episodes, and its states are Markov states, ``[obs | h | c]``
    (:mod:`~quarl_bench.families.recurrent`); a Dict policy's are flat rows (:mod:`quarl_bench.observation_layout`)."""
    from quarl_bench.zoo.policy import as_policy

    n_envs = min(CALIBRATION_ENVS, count)
    env = make_env(n_envs, seed)
    try:
        observations = env.reset()
        states: list[np.ndarray] = []
        ended = np.zeros(n_envs, dtype=bool)
        acting = as_policy(policy)
        memory, starts = acting.initial_state(n_envs), np.ones(n_envs, dtype=bool)
        while (not ended.all() or len(states) * n_envs < count) and len(states) * n_envs < MAX_STEPS_PER_STATE * count:
            # a copy: the env's next step may write into its observation buffer
            states.append(np.array(acting.acted_states(observations, memory, starts)))
            actions, memory = acting.act(observations, memory, starts, deterministic=True)
            observations, _, dones, _ = env.step(actions)
            starts = np.asarray(dones, dtype=bool)
            ended |= starts
    finally:
        env.close()
    visited = np.concatenate(states)
    chosen = np.random.default_rng(seed).choice(len(visited), size=min(count, len(visited)), replace=False)
    return visited[np.sort(chosen)]


def states_hash(states: np.ndarray) -> str:
    """A content hash of a calibration set (stored with every row calibrated on it)."""
    return hashlib.sha256(np.ascontiguousarray(states, dtype=np.float32).tobytes()).hexdigest()[:16]
