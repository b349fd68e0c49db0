"""``obs-delay=k``: sensor latency, the policy sees the observation of k steps before (the episode's first one until
then); a Dict observation's every key alike. The env itself runs on time: only what the policy is shown is late."""

from __future__ import annotations

from typing import Any

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation


def observe(observation: np.ndarray, severity: float, memory: dict, rng: np.random.Generator, scale: Any) -> Any:
    delay = int(severity)
    if not delay:
        return observation
    seen = memory.setdefault("seen", [])
    seen.append(np.array(observation, copy=True))
    return seen.pop(0) if len(seen) > delay else seen[0]


register_perturbation(
    PerturbationKind(
        "obs-delay",
        "observation",
        0,
        50,
        "steps the policy's observation lags the env",
        integer=True,
        order=20,
        observe=observe,
        scaled=False,
    )
)
