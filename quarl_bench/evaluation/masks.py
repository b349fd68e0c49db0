"""Action masks, as sb3-contrib reads them: an env that says which actions are legal now (``action_masks()``, the
``ActionMasker`` convention) has every policy played on it choose among those only.

A policy acts under a mask through its decision values (logits, Q-values or mean quantiles: the adapter's
``decision_values``), the illegal ones set to -inf before the argmax, and through its probabilities (zeroed and
renormalised) when actions are sampled: what sb3-contrib's ``MaskableCategorical`` does for MaskablePPO, for any
discrete policy. A policy with neither (a continuous one, a predictor such as an exported artifact) is refused on a
masked env, in one line. Each evaluation counts the decisions a mask constrained, those where it changed the greedy
action, and the illegal actions played (0 unless something is wrong).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs

from quarl_bench.errors import QuarlError

MASK_METHOD = "action_masks"  # sb3-contrib's name (sb3_contrib.common.maskable.utils.EXPECTED_METHOD_NAME)


def mask_reader(env) -> Callable[[], np.ndarray] | None:
    """A function reading the VecEnv's current masks (one boolean row per env), or None when its envs have none."""
    if not env.has_attr(MASK_METHOD):
        return None
    return lambda: np.stack([np.asarray(mask, dtype=bool) for mask in env.env_method(MASK_METHOD)])


def masked_argmax(values: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Per row, the legal action with the largest value."""
    return np.where(masks, values, -np.inf).argmax(axis=1)


def masked_probabilities(probabilities: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Probabilities over the legal actions only, renormalised per row (a row whose legal actions all had
    probability 0 becomes uniform over them)."""
    kept = np.where(masks, probabilities, 0.0)
    totals = kept.sum(axis=1, keepdims=True)
    uniform = masks / masks.sum(axis=1, keepdims=True)
    return np.where(totals > 0, kept / np.where(totals > 0, totals, 1.0), uniform)


def mask_values(adapter, observation: np.ndarray) -> np.ndarray:
    """The values a masked greedy action is the argmax of (:func:`~quarl_bench.evaluation.margins.decision_values`).

    :raises QuarlError: for a policy that exposes none, or carries a state (it cannot be played under masks).
    """
    from quarl_bench.evaluation.margins import decision_values

    values = None if adapter.carries_state else decision_values(adapter, observation)
    if values is None:
        raise QuarlError(
            f"this env masks actions (action_masks()), and a {type(adapter.network).__name__} exposes no per-action "
            "values to mask: expected a discrete, stateless SB3 policy (MaskablePPO, PPO, DQN, QR-DQN...) or an env "
            "without masks"
        )
    return values


def greedy_step(policy, read_masks: Callable[[], np.ndarray] | None, observations: VecEnvObs, state, starts):
    """A policy's deterministic actions for a batch (SB3's ``predict``), among the legal ones where the env masks
    actions (``read_masks``: :func:`mask_reader`'s, or None); returns (actions, next state)."""
    if read_masks is None:
        return policy.predict(observations, state, starts, deterministic=True)
    from quarl_bench.zoo.policy import as_policy

    return masked_argmax(mask_values(as_policy(policy), np.asarray(observations)), read_masks()), state


@dataclass
class MaskCounts:
    """What masks did in one evaluation (summed over the processes that played parts of it)."""

    masked: int = 0  # decisions made under a mask
    changed: int = 0  # of those, where the mask changed the greedy action
    illegal: int = 0  # actions played that the mask forbade

    def count(self, masks: np.ndarray, unmasked: np.ndarray, greedy: np.ndarray, rows) -> None:
        self.masked += len(masks) if isinstance(rows, slice) else int(np.count_nonzero(rows))
        self.changed += int(np.count_nonzero((unmasked != greedy)[rows]))

    def played(self, masks: np.ndarray, actions: np.ndarray, rows) -> None:
        legal = masks[np.arange(len(masks)), np.asarray(actions).reshape(len(masks))]
        self.illegal += int(np.count_nonzero(~legal[rows]))

    def counts(self) -> dict[str, int]:
        return {"masked_decisions": self.masked, "mask_changed": self.changed, "illegal_actions": self.illegal}


def mask_summary(counts: dict[str, float]) -> dict[str, float]:
    """The row's mask figures from summed :meth:`MaskCounts.counts` ({} where no mask was read)."""
    masked = counts.get("masked_decisions", 0)
    if not masked:
        return {}
    return {
        "masked_decisions": masked,
        "mask_changed_share": counts["mask_changed"] / masked,
        "illegal_actions": counts["illegal_actions"],
    }
