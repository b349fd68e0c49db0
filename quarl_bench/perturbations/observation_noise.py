"""``obs-noise=σ``: Gaussian noise on every observation the policy sees, σ times each dimension's spread over the fp32
policy's fixed-state set (so one σ means the same for a position and a velocity)."""

from __future__ import annotations

from typing import Any

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation


def observe(
    observation: np.ndarray, severity: float, memory: dict, rng: np.random.Generator, scale: np.ndarray
) -> np.ndarray:
    # drawn whatever the severity (a mixture's 0 too): the generator's stream stays the same for every severity
    return observation + (severity * scale * rng.standard_normal(scale.shape)).astype(np.float32)


def box_observations(env_id: str) -> bool:
    """Whether the env's observations are one Box, whose per-dimension spread quarl-bench measures."""
    import gymnasium as gym
    from gymnasium import spaces

    from quarl_bench.zoo.envs import register_env_packages
    from quarl_bench.zoo.quiet import native_output_silenced

    register_env_packages()
    with native_output_silenced():  # pybullet envs print from C as they start
        env: Any = gym.make(env_id)
    try:
        return not isinstance(env.observation_space, spaces.Dict)
    finally:
        env.close()


register_perturbation(
    PerturbationKind(
        "obs-noise",
        "observation",
        0.0,
        10.0,
        "x each dimension's spread",
        observe=observe,
        accepts=box_observations,
        why_not="its observations are a Dict (a goal-reaching env), whose per-dimension spread quarl-bench does not "
        "measure",
    )
)
