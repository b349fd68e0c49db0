"""``action-delay=k``: the env receives the action chosen k steps before (the episode's first action until then)."""

from __future__ import annotations

from typing import Any

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation


def act(action: Any, severity: float, memory: dict, rng: np.random.Generator, space: Any) -> Any:
    delay = int(severity)
    if not delay:
        return action
    queue = memory.setdefault("delayed", [])
    queue.append(action)
    return queue.pop(0) if len(queue) > delay else queue[0]


register_perturbation(PerturbationKind("action-delay", "action", 0, 50, "steps", integer=True, order=20, act=act))
