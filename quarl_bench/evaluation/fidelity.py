"""Closed-loop fidelity: the fp32 and a quantized policy played side by side from the same seeds, step for step.

Env ``i`` of both runs is seeded alike, so until the policies act differently the two trajectories are identical.
Per episode (each env's first) we record the first step where the actions differ (discrete: another action;
continuous: more than 1% of the action range apart) and the first step where the observations the policies see
are more than ``threshold`` apart (max-norm, after the agent's own normalisation); None where it never happens
before the episode ends in both runs at the same step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.vec_env import VecEnv

from quarl_bench.evaluation.evaluate import with_noise
from quarl_bench.evaluation.masks import greedy_step, mask_reader

ACTION_RANGE_SHARE = 0.01


@dataclass
class Divergence:
    """Per episode: first differing action step, first diverging observation step (None: never), and the length
    of the fp32 episode."""

    first_action: list[int | None]
    first_obs: list[int | None]
    lengths: list[int]


def actions_differ(a: np.ndarray, b: np.ndarray, space: spaces.Space) -> np.ndarray:
    """Per env: whether two batches of actions differ (continuous: by more than 1% of the action range)."""
    n = len(a)
    if isinstance(space, spaces.Box):
        scale = np.where(np.isfinite(space.high - space.low), space.high - space.low, 2.0).reshape(1, -1)
        return np.max(np.abs(a - b).reshape(n, -1) / scale, axis=1) > ACTION_RANGE_SHARE
    return np.any(a.reshape(n, -1) != b.reshape(n, -1), axis=1)


def side_by_side(
    reference: BasePolicy,
    policy: BasePolicy,
    reference_env: VecEnv,
    env: VecEnv,
    threshold: float,
    obs_noise: float = 0.0,
    seed: int = 0,
    max_steps: int = 100_000,
) -> Divergence:
    """Play each env's first episode in both envs (same seeds, same noise draws) and return where they part."""
    from quarl_bench.observation_layout import as_flat

    n, space = env.num_envs, env.observation_space
    obs_ref, obs_q = _batch(reference_env.reset()), _batch(env.reset())  # a Dict's batch stays a dict of arrays
    noise_ref, noise_q = np.random.default_rng(seed), np.random.default_rng(seed)
    first_action: list[int | None] = [None] * n
    first_obs: list[int | None] = [None] * n
    lengths = [0] * n
    done_ref, done_q = np.zeros(n, bool), np.zeros(n, bool)
    state_ref = state_q = None  # recurrent policies carry theirs (None for the others)
    start_ref, start_q = np.ones(n, bool), np.ones(n, bool)
    masks_ref, masks_q = mask_reader(reference_env), mask_reader(env)  # a masked env's legal actions, each side's
    with torch.inference_mode():
        for step in range(max_steps):
            seen_ref, seen_q = _noisy(obs_ref, obs_noise, noise_ref), _noisy(obs_q, obs_noise, noise_q)
            flat_ref, flat_q = (as_flat(space, seen).astype(float) for seen in (seen_ref, seen_q))
            gap = np.max(np.abs(flat_ref - flat_q).reshape(n, -1), axis=1)
            action_ref, state_ref = greedy_step(reference, masks_ref, seen_ref, state_ref, start_ref)
            action_q, state_q = greedy_step(policy, masks_q, seen_q, state_q, start_q)
            differ = actions_differ(np.asarray(action_ref), np.asarray(action_q), env.action_space)
            for i in range(n):
                if done_ref[i] and done_q[i]:
                    continue
                if first_obs[i] is None and (gap[i] > threshold or done_ref[i] != done_q[i]):
                    first_obs[i] = step
                if first_action[i] is None and not (done_ref[i] or done_q[i]) and differ[i]:
                    first_action[i] = step
            next_ref, _, dones_ref, _ = reference_env.step(action_ref)
            next_q, _, dones_q, _ = env.step(action_q)
            obs_ref, obs_q = _batch(next_ref), _batch(next_q)
            lengths = [lengths[i] + int(not done_ref[i]) for i in range(n)]
            start_ref, start_q = np.asarray(dones_ref, bool), np.asarray(dones_q, bool)
            done_ref |= dones_ref
            done_q |= dones_q
            if done_ref.all() and done_q.all():
                break
    return Divergence(first_action, first_obs, lengths)


def _batch(observation: Any) -> Any:
    """A VecEnv's observations: an array, or (a Dict space) a dict of arrays, as policies take them."""
    return observation if isinstance(observation, dict) else np.asarray(observation)


def _noisy(observation: Any, sigma: float, rng: np.random.Generator) -> Any:
    """:func:`with_noise` on each key of a Dict observation, in its order."""
    if isinstance(observation, dict):
        return {key: with_noise(value, sigma, rng) for key, value in observation.items()}
    return with_noise(observation, sigma, rng)
