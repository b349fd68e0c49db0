"""What an episode achieved besides its return, read from the env's ``info`` as the episode is played.

- ``success``: ``info["is_success"]`` at the episode's last step (gymnasium-robotics' and panda-gym's convention);
- ``progress``: ``info["progress"]`` at the last step, a share of the task in [0, 1];
- ``cost``: ``info["cost"]`` summed over the episode (safety-gymnasium's convention);
- ``terminated``: 1 when the episode ended on its own, 0 when a time limit cut it (SB3's ``TimeLimit.truncated``);
- ``steps_to_success``: the first step whose ``info["is_success"]`` is true, or the episode's length where none is
  (a time to success, bounded by the episode's length; lower is better).

An outcome the env reports in some episodes only is not kept for the row: a rate over part of its episodes would
not pair with another row's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

OUTCOMES = ("success", "progress", "cost", "terminated", "steps_to_success")


class OutcomeTracker:
    """Each env's running cost, and each finished episode's outcomes."""

    def __init__(self, n_envs: int) -> None:
        self.costs = np.zeros(n_envs)
        self.costed = np.zeros(n_envs, dtype=bool)
        self.steps = np.zeros(n_envs, dtype=int)
        self.first_success = np.zeros(n_envs, dtype=int)  # 0: not yet
        self.reports_success = np.zeros(n_envs, dtype=bool)

    def step(self, infos: Sequence[dict[str, Any]]) -> None:
        self.steps += 1
        for index, info in enumerate(infos):
            if info.get("is_success") is not None:
                self.reports_success[index] = True
                if info["is_success"] and not self.first_success[index]:
                    self.first_success[index] = self.steps[index]
            cost = info.get("cost")
            if cost is not None:
                self.costs[index] += float(cost)
                self.costed[index] = True

    def finish(self, index: int, info: dict[str, Any]) -> dict[str, float]:
        """The outcomes of env ``index``'s episode, which ended on the step ``info`` describes."""
        found = {"terminated": float(not info.get("TimeLimit.truncated", False))}
        if info.get("is_success") is not None:
            found["success"] = float(bool(info["is_success"]))
        if info.get("progress") is not None:
            found["progress"] = float(info["progress"])
        if self.costed[index]:
            found["cost"] = float(self.costs[index])
        if self.reports_success[index]:
            found["steps_to_success"] = float(self.first_success[index] or self.steps[index])
        self.costs[index], self.costed[index] = 0.0, False
        self.steps[index], self.first_success[index], self.reports_success[index] = 0, 0, False
        return found


def per_outcome(episodes: Sequence[dict[str, float]]) -> dict[str, list[float]]:
    """Each outcome every episode reports, as a list in the episodes' order."""
    if not episodes:
        return {}
    return {name: [episode[name] for episode in episodes] for name in OUTCOMES if all(name in e for e in episodes)}
