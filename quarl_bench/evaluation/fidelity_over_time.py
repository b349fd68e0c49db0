"""Fidelity over time: on fixed fp32 trajectories, how far a quantized policy's decisions (and, for a recurrent
policy, its hidden state) are from fp32's at each step of the episode.

The fp32 policy plays each env's first episode; the quantized policy sees the same observations and carries its own
state along them, but its actions are not played (teacher forcing). So step t of every episode compares the two on
the same history, and a curve that rises with t is error building up in the state, not trajectories drifting apart.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.vec_env import VecEnv

from quarl_bench.evaluation.agreement import action_span
from quarl_bench.evaluation.fidelity import actions_differ
from quarl_bench.evaluation.masks import greedy_step, mask_reader
from quarl_bench.zoo.policy import as_policy


@dataclass
class OverTime:
    """Per step within the episode: episodes still running, how many of them the policies' actions differ in
    (continuous: by more than 1% of the action range), the summed action error as a share of the action range, and
    the summed mean |h_q - h_fp32| of the actor's hidden state (recurrent policies; else empty)."""

    alive: list[int] = field(default_factory=list)
    flips: list[int] = field(default_factory=list)
    action_error: list[float] = field(default_factory=list)
    hidden_error: list[float] = field(default_factory=list)
    label: str = ""

    def as_row(self) -> dict[str, object]:
        return asdict(self)


def over_time(
    reference: BasePolicy, policy: BasePolicy, env: VecEnv, label: str = "", max_steps: int = 100_000
) -> OverTime:
    """Play each env's first episode with ``reference`` and compare ``policy`` with it step by step."""
    n = env.num_envs
    space = env.action_space
    span = action_span(space) if isinstance(space, spaces.Box) else None
    recurrent = as_policy(reference).lstm_state and as_policy(policy).lstm_state
    found = OverTime(label=label)
    observations = env.reset()
    reference_state = policy_state = None
    starts, done = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    masks = mask_reader(env)  # a masked env's legal actions: both policies choose among them
    with torch.inference_mode():
        for _ in range(max_steps):
            live = ~done
            if not live.any():
                break
            expected, reference_state = greedy_step(reference, masks, observations, reference_state, starts)
            actions, policy_state = greedy_step(policy, masks, observations, policy_state, starts)
            expected, actions = np.asarray(expected), np.asarray(actions)
            found.alive.append(int(live.sum()))
            found.flips.append(int(actions_differ(expected, actions, space)[live].sum()))
            if span is not None:
                error = np.max(np.abs(actions - expected).reshape(n, -1) / span, axis=1)
                found.action_error.append(float(error[live].sum()))
            if recurrent:
                gap = np.abs(policy_state[0] - reference_state[0]).mean(axis=(0, 2))  # per env, over layers and units
                found.hidden_error.append(float(gap[live].sum()))
            observations, _, dones, _ = env.step(expected)
            starts = np.asarray(dones, dtype=bool)
            done |= starts
    return found


def per_step_rates(row: dict[str, list], what: str, bin_steps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The mean of ``what`` (``flips``, ``action_error``, ``hidden_error``) per running episode, per bin of
    ``bin_steps`` steps: (first step of each bin, rate). Bins with no running episode are left out."""
    alive = np.asarray(row["alive"], dtype=float)
    values = np.asarray(row[what], dtype=float)
    if not len(values):
        return np.array([]), np.array([])
    bins = np.arange(len(values)) // bin_steps
    totals = np.bincount(bins, weights=values)
    counts = np.bincount(bins, weights=alive)
    keep = counts > 0
    return (np.arange(len(totals)) * bin_steps)[keep], totals[keep] / counts[keep]
