"""``obs-noise-abs=σ``: Gaussian noise of standard deviation σ on every value the policy sees, in its own units (after
the agent's normalisation, where it has one): what ``--obs-noise σ`` plays (a job's older ``obs_noise`` field, which
rows stored before this kind still carry). Needs no spread, so a Dict observation's keys get it too."""

from __future__ import annotations

from typing import Any

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation


def observe(observation: np.ndarray, severity: float, memory: dict, rng: np.random.Generator, scale: Any) -> Any:
    noise = severity * rng.standard_normal(np.shape(observation))
    return (np.asarray(observation, dtype=np.float32) + noise).astype(np.float32)


register_perturbation(
    PerturbationKind(
        "obs-noise-abs",
        "observation",
        0.0,
        100.0,
        "Gaussian std in the policy's own units, as --obs-noise",
        order=5,
        observe=observe,
        scaled=False,
    )
)
