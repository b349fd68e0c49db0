"""``obs-bias=b``: a miscalibrated sensor, each observation dimension offset for a whole episode by b times its spread
times a standard normal drawn at the episode's start (the same offset at every step, a new one next episode)."""

from __future__ import annotations

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation


def observe(
    observation: np.ndarray, severity: float, memory: dict, rng: np.random.Generator, scale: np.ndarray
) -> np.ndarray:
    if "bias" not in memory:  # drawn once per episode, from its own generator
        memory["bias"] = (severity * scale * rng.standard_normal(scale.shape)).astype(np.float32)
    return observation + memory["bias"]


register_perturbation(
    PerturbationKind(
        "obs-bias",
        "observation",
        0.0,
        10.0,
        "a per-episode offset, x each dimension's spread",
        order=10,
        observe=observe,
    )
)
