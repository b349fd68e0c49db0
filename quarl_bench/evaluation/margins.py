"""Decision margins: how far a discrete policy's best action is ahead of its second best on the states it visits.

A policy whose greedy action wins by a hair flips when quantization moves its outputs by a hair, whatever its weight
spread (the zoo's dqn/LunarLander: a median top-2 Q gap of 0.009 on its visited states, measured here).
"""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.policies import BasePolicy

from quarl_bench.zoo.greedy import top2_gap  # noqa: F401  (margins' own measure, re-exported)

MARGIN_STATES = 2000  # visited states kept per evaluation (reservoir sample) to measure margins on


def decision_values(policy: BasePolicy, observations: np.ndarray) -> np.ndarray | None:
    """The per-action scores whose argmax is the greedy action: Q-values (DQN), mean quantiles (QR-DQN), action
    logits (actor-critics with discrete actions, a user's module; a recurrent policy's on Markov states); None for
    continuous-action policies, which have no top-2 gap, and for a module that outputs its actions."""
    from quarl_bench.zoo.policy import as_policy

    return as_policy(policy).decision_values(observations)


def margin_summary(gaps: np.ndarray, prefix: str = "") -> dict[str, float]:
    """Median, 10th and 90th percentile of top-2 gaps."""
    if len(gaps) == 0:
        return {}
    return {
        f"{prefix}margin_median": float(np.median(gaps)),
        f"{prefix}margin_p10": float(np.quantile(gaps, 0.1)),
        f"{prefix}margin_p90": float(np.quantile(gaps, 0.9)),
    }


def margin_change(policy: BasePolicy, reference: BasePolicy | None, states: np.ndarray | None) -> dict[str, float]:
    """The policy's margins on ``states`` and, with a reference (the fp32 policy), the reference's margins on the same
    states, the median change and the share of states whose greedy action differs."""
    if states is None or not len(states):
        return {}
    values = decision_values(policy, states)
    if values is None:
        return {}
    gaps = top2_gap(values)
    summary = margin_summary(gaps) | {"margin_states": len(states)}
    reference_values = decision_values(reference, states) if reference is not None else None
    if reference_values is not None:
        reference_gaps = top2_gap(reference_values)
        summary |= margin_summary(reference_gaps, "fp32_")
        summary["margin_change_median"] = float(np.median(gaps - reference_gaps))
        summary["state_flips"] = float(np.mean(values.argmax(axis=1) != reference_values.argmax(axis=1)))
    return summary


class StateReservoir:
    """A uniform sample of at most ``capacity`` observations from a stream of batches (reservoir sampling)."""

    def __init__(self, capacity: int = MARGIN_STATES, seed: int = 0) -> None:
        self.capacity = capacity
        self.seen = 0
        self.kept: list[np.ndarray] = []
        self.rng = np.random.default_rng(seed)

    def add(self, batch: np.ndarray) -> None:
        batch = np.asarray(batch)
        free = max(0, min(len(batch), self.capacity - len(self.kept)))
        self.kept += [row.copy() for row in batch[:free]]
        rest = batch[free:]
        if len(rest):  # row number k (0-based, over the whole stream) replaces a random slot with prob. capacity/(k+1)
            slots = self.rng.integers(0, self.seen + free + np.arange(len(rest)) + 1)
            for row, slot in zip(rest[slots < self.capacity], slots[slots < self.capacity], strict=True):
                self.kept[slot] = row.copy()
        self.seen += len(batch)

    def states(self) -> np.ndarray:
        return np.stack(self.kept) if self.kept else np.empty((0,))
