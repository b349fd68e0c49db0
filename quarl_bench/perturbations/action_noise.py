"""``action-noise=σ``: Box actions get Gaussian noise of σ times half their range (clipped to the bounds); a Discrete
action is replaced by a uniformly drawn one with probability σ."""

from __future__ import annotations

from typing import Any

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation


def act(action: Any, severity: float, memory: dict, rng: np.random.Generator, space: Any) -> Any:
    from gymnasium import spaces

    if severity and isinstance(space, spaces.Discrete) and rng.random() < severity:
        return space.start + rng.integers(space.n)
    if severity and isinstance(space, spaces.Box):
        return np.clip(action + rng.normal(0.0, severity * (space.high - space.low) / 2), space.low, space.high)
    return action


register_perturbation(
    PerturbationKind("action-noise", "action", 0.0, 1.0, "probability or x half the range", order=10, act=act)
)
