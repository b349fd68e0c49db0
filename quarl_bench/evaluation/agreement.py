"""Action agreement with a reference policy, measured while the evaluated policy plays: the share of equal greedy
actions (discrete), or the action error against the action range, the L2 distance and the relative error
(continuous); under an env's masks, the reference's greedy action among the same legal actions."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.policies import BasePolicy

from quarl_bench.evaluation.masks import mask_values, masked_argmax
from quarl_bench.zoo.policy import as_policy


class AgreementMeter:
    """Wraps the evaluated actor; on every batch also compares its policy's greedy action with a reference policy's.

    Discrete actions: fraction of equal greedy actions. Continuous: the action error as a share of the action
    range (``action_range_error``: the largest |a - a_fp32| / (high - low) over the action's dimensions, averaged;
    the export gate's measure, meaningful at a set point where the fp32 action is 0), the mean L2 distance, and that
    distance relative to the reference action's norm over the decisions where that norm is at least 5% of the
    range's (a regulator's near-zero actions would make it meaningless). Counted over the decisions of the episodes
    the evaluation counts (``playing``: the envs that have not finished their share yet, kept current by
    :func:`~quarl_bench.evaluation.evaluate.play`). ``actor``: the evaluation's
    :class:`~quarl_bench.evaluation.evaluate.EpisodeActor` (its greedy actions, its adapter, the step's masks).
    """

    def __init__(self, actor: Any, reference: BasePolicy, playing: np.ndarray | None = None) -> None:
        self.actor = actor
        self.playing = playing
        self.policy = actor.policy
        # the actor's fast path where it built one (not in sampled mode, where its forward pass yields the greedy)
        self.policy_greedy = actor.greedy or actor.adapter.greedy()
        # a stateful reference carries its own state along the evaluated policy's trajectory
        adapter = self.reference = as_policy(reference)
        self.reference_state = adapter.follower() if adapter.carries_state else None
        self.reference_greedy = adapter.greedy()
        self.discrete = actor.adapter.discrete
        self.decisions = 0
        self.equal = 0
        self.distance_sum = 0.0
        self.relative_sum = 0.0
        self.relative_decisions = 0
        self.range_sum = 0.0
        self.span = None if self.discrete else action_span(self.policy.action_space)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        actions, state = self.actor.predict(observation, state, episode_start, deterministic)
        greedy = self.actor.last_greedy
        if greedy is None:
            greedy = self.policy_greedy(observation)
        rows = np.ones(len(np.asarray(greedy)), dtype=bool) if self.playing is None else np.asarray(self.playing)
        if self.reference_state is not None:  # stepped on every env, whether it counts or not
            expected = self.reference_state(observation, episode_start)
            if np.any(rows):
                self._record(np.asarray(greedy)[rows], expected[rows])
        elif np.any(rows):
            observation = observation_rows(observation, rows)
            masks = self.actor.masks
            expected = (
                self.reference_greedy(observation)
                if masks is None  # under a mask, the reference's greedy action among the same legal actions
                else masked_argmax(mask_values(self.reference, observation), masks[rows])
            )
            self._record(np.asarray(greedy)[rows], np.asarray(expected))
        return actions, state

    def _record(self, actions: np.ndarray, expected: np.ndarray) -> None:
        n = len(actions)
        self.decisions += n
        if self.discrete:
            self.equal += int(np.sum(np.all(actions.reshape(n, -1) == expected.reshape(n, -1), axis=1)))
            return
        span = self.span
        assert span is not None  # continuous actions have one
        difference = (actions - expected).reshape(n, -1)
        distance = np.linalg.norm(difference, axis=1)
        norm = np.linalg.norm(expected.reshape(n, -1), axis=1)
        self.distance_sum += float(distance.sum())
        self.range_sum += float(np.sum(np.max(np.abs(difference) / span, axis=1)))
        clear = norm >= RELATIVE_FLOOR * float(np.linalg.norm(span))
        self.relative_sum += float(np.sum(distance[clear] / norm[clear]))
        self.relative_decisions += int(clear.sum())

    def counts(self) -> dict[str, float]:
        """The raw sums (what processes that played parts of one evaluation add up)."""
        return {
            "decisions": self.decisions,
            "equal": self.equal,
            "distance_sum": self.distance_sum,
            "relative_sum": self.relative_sum,
            "relative_decisions": self.relative_decisions,
            "range_sum": self.range_sum,
        }

    def summary(self) -> dict[str, float]:
        return agreement_summary(self.counts(), self.discrete)


def agreement_summary(counts: dict[str, float], discrete: bool) -> dict[str, float]:
    """Agreement from :meth:`AgreementMeter.counts` (summed over processes)."""
    decisions = counts["decisions"]
    if not decisions:
        return {}
    if discrete:
        return {"decisions": decisions, "action_agreement": counts["equal"] / decisions}
    found = {
        "decisions": decisions,
        "action_range_error": counts["range_sum"] / decisions,
        "action_l2": counts["distance_sum"] / decisions,
    }
    if counts["relative_decisions"]:
        found["action_rel_error"] = counts["relative_sum"] / counts["relative_decisions"]
    return found


RELATIVE_FLOOR = 0.05  # the relative error counts decisions whose fp32 action norm is >= this share of the range's


def action_span(space) -> np.ndarray:
    """high - low of a Box action space, flattened (1 where a bound is infinite: errors then in the action's units)."""
    span = (np.asarray(space.high, float) - np.asarray(space.low, float)).reshape(-1)
    return np.where(np.isfinite(span) & (span > 0), span, 1.0)


def observation_rows(observation: Any, rows: np.ndarray) -> Any:
    """The rows ``rows`` of a batch of observations: an array's, or each key's of a Dict observation (goal-reaching
    envs: observation, achieved and desired goal)."""
    if isinstance(observation, dict):
        return {key: np.asarray(value)[rows] for key, value in observation.items()}
    return np.asarray(observation)[rows]
