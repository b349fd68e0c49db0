"""``sticky=p``: the env repeats the previous action with probability p."""

from __future__ import annotations

from typing import Any

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation


def act(action: Any, severity: float, memory: dict, rng: np.random.Generator, space: Any) -> Any:
    previous = memory.get("previous")
    if severity and previous is not None and rng.random() < severity:
        action = previous
    memory["previous"] = action
    return action


register_perturbation(PerturbationKind("sticky", "action", 0.0, 1.0, "probability", order=30, act=act))
