"""Every episode of an evaluation starts from a reset seed of its own, so episodes pair one to one across policies.

Seeding each env once (``seed + i``) is not enough for pairing: an env's generator also draws during ``step``
(LunarLander's engine dispersion, Atari's no-op resets), so after one episode of a different length the next
episode of the same env starts from another state. Here episode ``k`` of env ``i`` is reset with
``reset_seed(seed, i, k)``: the fp32 and the quantized policy face the same start in every episode, and where their
actions agree the two episodes are identical. An episode's identity is ``(env index, episode number, reset seed)``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

EpisodeId = tuple[int, int, int]  # (env index, episode number within that env, reset seed)


def reset_seed(seed: int, env_index: int, episode: int) -> int:
    """The reset seed of episode ``episode`` of env ``env_index`` in an evaluation seeded ``seed`` (32 bits)."""
    return int(np.random.SeedSequence([seed, env_index, episode]).generate_state(1)[0])


class EpisodeSeeds(gym.Wrapper):
    """Directly around the base env: reset number ``k`` uses ``reset_seed(seed, env_index, k)``, whatever seed the
    wrappers above pass down. ``seeds[k]`` is the seed episode ``k`` started from."""

    def __init__(self, env: gym.Env, seed: int, env_index: int) -> None:
        super().__init__(env)
        self.base_seed, self.env_index = seed, env_index
        self.seeds: list[int] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.seeds.append(reset_seed(self.base_seed, self.env_index, len(self.seeds)))
        return self.env.reset(seed=self.seeds[-1], options=options)


def seed_every_episode(venv: VecEnv, seed: int, envs: range) -> list[EpisodeSeeds] | None:
    """Put an :class:`EpisodeSeeds` under every env of ``venv`` (global indices ``envs``), right above the base env
    so that every wrapper's own reset draws (Atari's no-ops) come from the episode's seed too; None for a vector
    env whose envs live in other processes."""
    inner = venv.unwrapped
    if not isinstance(inner, DummyVecEnv):
        return None
    seeders = []
    for position, index in enumerate(envs):
        outer = inner.envs[position]
        seeder = EpisodeSeeds(outer.unwrapped, seed, index)
        if outer is outer.unwrapped:
            inner.envs[position] = seeder
        else:
            wrapper = outer
            while isinstance(wrapper, gym.Wrapper) and wrapper.env is not wrapper.unwrapped:
                wrapper = wrapper.env
            assert isinstance(wrapper, gym.Wrapper)  # the innermost wrapper, around the unwrapped env
            wrapper.env = seeder
        seeders.append(seeder)
    return seeders
