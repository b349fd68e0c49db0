"""Fidelity on one fixed set of fp32-visited states: the same states for every precision.

The on-policy agreement (``evaluate.AgreementMeter``) counts the states each quantized policy visits itself, so it
cannot be compared across widths: a policy that crashes early is scored on easy start states (dqn LunarLander's
int4 agreed more than its int8, while picking one action 99% of the time). Here every precision is asked about the
same states, drawn uniformly from whole episodes the fp32 policy plays on envs seeded apart from every evaluation
and calibration seed.

Discrete actions: the flip rate (share of states whose greedy action differs from fp32's), split by the fp32 decision
margin (top-2 gap): near-ties are the quarter of states with the smallest fp32 margin, clear decisions the rest.
Continuous actions: the mean L2 distance to the fp32 action, and that distance relative to the fp32 action's norm.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from stable_baselines3.common.policies import BasePolicy

from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.calibration import visited_states
from quarl_bench.evaluation.evaluate import discrete_actions, greedy_actions
from quarl_bench.evaluation.margins import decision_values, top2_gap
from quarl_bench.zoo.quiet import native_output_silenced

FIXED_STATES = 1000
FIXED_IMAGE_STATES = 200  # image observations (Atari: 28 KB each) keep the set, and the play collecting it, small
FIXED_STATES_SEED = 2_000_000  # apart from evaluation seeds and from CALIBRATION_SEED (calibrated PTQ's states)
NEAR_TIE_SHARE = 0.25  # the share of states, smallest fp32 margins first, counted as near-ties

_cache: dict[str, np.ndarray] = {}


def fixed_states(agent_hash: str, policy: BasePolicy, make_env: Callable) -> np.ndarray:
    """The agent's fixed fp32-visited states (played once per process and agent)."""
    if agent_hash not in _cache:
        count = FIXED_STATES if len(policy.observation_space.shape or ()) <= 1 else FIXED_IMAGE_STATES
        try:
            with native_output_silenced():  # pybullet prints "argv[0]=" from C when an env is first reset
                _cache[agent_hash] = visited_states(policy, make_env, count, FIXED_STATES_SEED)
        except QuarlError:  # a Dict observation with keys that are not vectors: no fixed set
            _cache[agent_hash] = np.empty((0,))
    return _cache[agent_hash]


def fixed_state_fidelity(policy: BasePolicy, reference: BasePolicy, states: np.ndarray) -> dict[str, float]:
    """How far ``policy``'s greedy actions are from the fp32 ``reference``'s on ``states`` (see the module doc)."""
    if not len(states):
        return {}
    with torch.inference_mode():
        return _fidelity(policy, reference, states)


def _fidelity(policy: BasePolicy, reference: BasePolicy, states: np.ndarray) -> dict[str, float]:
    if not discrete_actions(reference):
        actions = np.asarray(greedy_actions(policy)(states), dtype=float).reshape(len(states), -1)
        expected = np.asarray(greedy_actions(reference)(states), dtype=float).reshape(len(states), -1)
        from quarl_bench.evaluation.agreement import RELATIVE_FLOOR, action_span

        span = action_span(reference.action_space)
        distance = np.linalg.norm(actions - expected, axis=1)
        norm = np.linalg.norm(expected, axis=1)
        clear = norm >= RELATIVE_FLOOR * float(np.linalg.norm(span))
        found = {
            "fixed_states": len(states),
            "fixed_action_range_error": float(np.max(np.abs(actions - expected) / span, axis=1).mean()),
            "fixed_action_l2": float(distance.mean()),
        }
        if clear.any():
            found["fixed_action_rel_error"] = float((distance[clear] / norm[clear]).mean())
        return found
    values, reference_values = decision_values(policy, states), decision_values(reference, states)
    if values is None or reference_values is None:
        flips = greedy_actions(policy)(states) != greedy_actions(reference)(states)
        return {"fixed_states": len(states), "fixed_flip_rate": float(np.mean(flips))}
    flips = values.argmax(axis=1) != reference_values.argmax(axis=1)
    margins = top2_gap(reference_values)
    near = np.argsort(margins, kind="stable")[: max(1, round(NEAR_TIE_SHARE * len(states)))]
    is_near = np.zeros(len(states), dtype=bool)
    is_near[near] = True
    return {
        "fixed_states": len(states),
        "fixed_flip_rate": float(flips.mean()),
        "fixed_flip_near_tie": float(flips[is_near].mean()),
        "fixed_flip_clear": float(flips[~is_near].mean()) if (~is_near).any() else float("nan"),
        "fixed_near_tie_margin": float(margins[near].max()),
    }
