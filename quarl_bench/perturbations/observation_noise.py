"""``obs-noise=σ``: Gaussian noise on every observation the policy sees, σ times each dimension's spread over the fp32
policy's fixed-state set (so one σ means the same for a position and a velocity); a Dict observation's spread is
measured on its keys concatenated. ``@key`` or ``@i:j`` perturbs that part only."""

from __future__ import annotations

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation


def observe(
    observation: np.ndarray, severity: float, memory: dict, rng: np.random.Generator, scale: np.ndarray
) -> np.ndarray:
    # drawn whatever the severity (a mixture's 0 too): the generator's stream stays the same for every severity
    return observation + (severity * scale * rng.standard_normal(scale.shape)).astype(np.float32)


register_perturbation(
    PerturbationKind(
        "obs-noise",
        "observation",
        0.0,
        10.0,
        "x each dimension's spread",
        observe=observe,
    )
)
