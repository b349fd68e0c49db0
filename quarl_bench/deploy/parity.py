"""The parity gate: an artifact played against the fake-quant policy it claims to be, on one fixed set of
fp32-visited states, before anything is written.

- Discrete actions: the flip rate (artifact action != fake-quant action) outside near-ties, the quarter of states
  with the smallest fp32 decision margin (the fixed-state fidelity's split: a flip there is a coin toss either
  implementation could make).
- Continuous actions: the largest action error in quantization steps of the action range ((high - low) / 255, the
  int8 grid of the bounds), outside the quarter of states where quantization itself moves the fake-quant action
  most from fp32 (a bang-bang controller's switching states, where two int8 implementations part like each parts
  from fp32); the largest error over all states is reported beside it.
- fp32 artifacts are held to torch: actions within 1e-5 (continuous), the same action outside exact ties whose
  fp32 top-2 gap is under 1e-5 (discrete).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.fixed_states import NEAR_TIE_SHARE  # the fixed-state fidelity's near-tie split
from quarl_bench.types import DEFAULT_CALIBRATION_STATES, QuantSpec

FLIP_LIMIT = 0.02  # discrete: flips outside near-ties
STEP_LIMIT = 4.0  # continuous: largest error outside the sensitive quarter, in int8 steps of the action range
FP32_TOLERANCE = 1e-5
W8A8 = QuantSpec(
    "int8",
    granularity="per-channel",
    symmetric=True,
    act_bits="int8",
    calibration_states=DEFAULT_CALIBRATION_STATES,
    calibration_method="minmax",
)


def claimed_spec(backend: str, image: bool = False) -> QuantSpec:
    """The fake-quant spec ``backend``'s artifact claims to be: its registered claim; else its own precision (fp32,
    fp16, ...), W8A8 per-channel (static int8) for an int8 backend only, its observation left in fp32 where the
    backend keeps a vector policy's first layer in fp32 (``image``: the policy takes images, whose first layer it
    quantizes). A backend registered without a claim is never gated against a precision it does not run at."""
    from dataclasses import replace

    from quarl_bench.deploy.targets import BACKENDS

    entry = BACKENDS.get(backend)
    if entry.claims is not None:
        return QuantSpec(**entry.claims)
    if entry.precision != "int8":
        return QuantSpec(entry.precision)
    return replace(W8A8, obs_bits="fp32") if entry.fp32_observation and not image else W8A8


def parity(
    run: Callable[[np.ndarray], np.ndarray],
    raw_states: np.ndarray,
    claimed: np.ndarray,
    fp32: np.ndarray,
    fp32_values: np.ndarray | None,
    bounds: tuple[np.ndarray, np.ndarray] | None,
    precision: str,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The gate's figures and verdict for an artifact (``run``) on ``raw_states``.

    :param claimed: the claimed fake-quant policy's actions on the same states; ``fp32``: the fp32 policy's.
    :param fp32_values: the fp32 decision values (discrete), for near-ties; ``bounds``: (low, high) (continuous).
    :param detail: filled with the artifact's ``actions``, the states the gate ``counted``, its ``measure``
        (``flips``, ``steps`` or ``abs``), ``limit`` and ``step``: what the artifact's ``check.py`` replays.
    """
    detail = {} if detail is None else detail
    # one observation per call, as deployed: a dynamically quantized graph (ort-int8-dynamic) takes its activation
    # ranges from the batch it is given, so a batch of 1,000 states would gate another policy than the one shipped
    actions = np.concatenate([np.asarray(run(raw_states[i : i + 1])) for i in range(len(raw_states))])
    n = len(raw_states)
    if bounds is None:
        actions, claimed = actions.reshape(n), np.asarray(claimed).reshape(n)
        from quarl_bench.evaluation.margins import top2_gap

        gaps = top2_gap(fp32_values) if fp32_values is not None else np.ones(n)
        flipped = actions != claimed
        detail.update(actions=actions, measure="flips")
        if precision == "fp32":
            outside = gaps >= FP32_TOLERANCE
            detail.update(counted=outside, limit=0.0)
            figure = float(flipped[outside].mean()) if outside.any() else 0.0
            return _verdict(
                {"states": n, "flip_rate": float(flipped.mean()), "flip_rate_outside_exact_ties": figure},
                figure == 0.0,
                "no flip outside fp32 ties under 1e-5",
            )
        near_tie = gaps <= np.quantile(gaps, NEAR_TIE_SHARE)
        detail.update(counted=~near_tie, limit=FLIP_LIMIT)
        figure = float(flipped[~near_tie].mean()) if (~near_tie).any() else 0.0
        figures: dict[str, Any] = {
            "states": n,
            "flip_rate": float(flipped.mean()),
            "flip_rate_near_ties": float(flipped[near_tie].mean()) if near_tie.any() else 0.0,
            "flip_rate_outside_near_ties": figure,
        }
        return _verdict(figures, figure <= FLIP_LIMIT, f"flip rate outside near-ties <= {FLIP_LIMIT:.0%}")
    actions = actions.reshape(n, -1).astype(np.float64)
    claimed = np.asarray(claimed, dtype=np.float64).reshape(n, -1)
    low, high = (np.asarray(b, dtype=np.float64).reshape(-1) for b in bounds)
    detail.update(actions=actions)
    if precision == "fp32":
        detail.update(counted=np.ones(n, dtype=bool), measure="abs", limit=FP32_TOLERANCE)
        error = float(np.abs(actions - claimed).max())
        return _verdict({"states": n, "max_abs_error": error}, error <= FP32_TOLERANCE, "max |action - torch| <= 1e-5")
    step = (high - low) / 255
    steps = (np.abs(actions - claimed) / step).max(axis=1)
    moved = np.abs(claimed - np.asarray(fp32, dtype=np.float64).reshape(n, -1)).max(axis=1)
    calm = moved <= np.quantile(moved, 1 - NEAR_TIE_SHARE)
    detail.update(counted=calm, measure="steps", limit=STEP_LIMIT, step=step.tolist())
    figure = float(steps[calm].max()) if calm.any() else 0.0
    per_dimension = (np.abs(actions - claimed) / step)[calm] if calm.any() else np.zeros((1, len(step)))
    figures = {
        "states": n,
        "step": step.tolist(),
        "max_error_steps": float(steps.max()),
        "max_error_steps_outside_sensitive": figure,
        "median_error_steps": float(np.median(steps)),
        "states_over_limit": int((steps[calm] > STEP_LIMIT).sum()),
        "worst_states": [int(i) for i in np.argsort(np.where(calm, steps, -1.0))[::-1][:5]],
        "worst_action_dimension": int(per_dimension.max(axis=0).argmax()),
    }
    return _verdict(
        figures, figure <= STEP_LIMIT, f"largest error outside the sensitive quarter <= {STEP_LIMIT:g} steps"
    )


def _verdict(figures: dict[str, Any], passed: bool, limit: str) -> dict[str, Any]:
    return figures | {"passed": bool(passed), "limit": limit}


def degraded_cause(backend: str, certification: dict[str, Any], claimed: str) -> str:
    """Why an artifact lost to fp32, where the verdicts say: its claim itself loses (the artifact matches it), so the
    agent needs fine-tuning for that claim (``harden --for``); or the artifact parts from its claim."""
    against_claim = certification["against_claimed"]["verdict"]
    if against_claim in ("equivalent", "safe", "undetermined"):
        return (
            f"likely cause: the policy itself does not survive {claimed} (the artifact is not shown to part "
            f"from that claim: verdict {against_claim}); remedy: quarl-bench harden ... --for {backend}, then export the "
            "hardened agent; "
        )
    return f"likely cause: the artifact parts from its claim (verdict {against_claim}), not the quantization; "


def artifact_parity(
    agent: Any,
    module: Any,
    artifact: Any,
    claimed: QuantSpec,
    reference: Any,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The parity gate's figures for ``artifact`` against ``reference``, the fake-quant policy ``claimed`` (see
    :func:`parity`), on the agent's fixed fp32-visited states (``detail``: filled with the gate's states, the claimed
    actions and what :func:`parity` records).

    :raises QuarlError: for a policy with no fixed-state set (a Dict observation with non-vector keys).
    """
    import torch

    from quarl_bench.deploy.backends import runner
    from quarl_bench.evaluation.evaluate import greedy_actions, torch_thread_count
    from quarl_bench.evaluation.fixed_states import fixed_states
    from quarl_bench.evaluation.margins import decision_values

    policy = agent.model.policy
    policy.set_training_mode(False)
    states = fixed_states(agent.ref.content_hash, policy, agent.make_env)
    if not len(states):
        raise QuarlError(
            "parity gate: this policy has no fixed-state set (a Dict observation whose keys are not vectors): "
            "expected a Box observation or a Dict of vector Boxes"
        )
    raw = module.raw_states(states)  # a recurrent form's fixed states are Markov states [obs | h | c]
    with torch.no_grad():  # what predict does; the fast greedy paths leave it to the caller
        claimed_actions = greedy_actions(reference)(states)
        fp32_actions = greedy_actions(policy)(states)
    bounds = None if module.discrete else (module.low.numpy(), module.high.numpy())
    with torch_thread_count(1):
        run = runner(artifact, threads=1)
        if detail is not None:
            detail.update(raw_states=raw, claimed=np.asarray(claimed_actions))
        found = parity(
            run, raw, claimed_actions, fp32_actions, decision_values(policy, states), bounds, claimed.precision, detail
        )
    spans = np.ptp(np.asarray(raw, np.float64).reshape(len(raw), -1), axis=0)
    spans = spans[spans > 0]
    return found | {"observation_span_ratio": float(spans.max() / spans.min()) if len(spans) else 1.0}


def failing_rows(parity: dict[str, Any], feature_names: list[str], raw_states: np.ndarray | None) -> str:
    """Which rows a failed continuous gate fails on: how many states exceed the limit, the worst ones (their index
    in the fixed-state set), the action dimension that carries the error, and the observation feature of the worst
    state farthest outside the set's 1-99% range (an input the calibration saw little of), where one is."""
    if parity.get("passed", True) or "worst_states" not in parity:
        return ""
    worst = parity["worst_states"]
    text = (
        f"{parity['states_over_limit']} of {parity['states']} states over the limit (worst: states "
        f"{', '.join(f'#{i}' for i in worst[:3])}; action dimension {parity['worst_action_dimension']})"
    )
    if raw_states is not None and len(raw_states):
        rows = np.asarray(raw_states, np.float64).reshape(len(raw_states), -1)
        low, high = np.quantile(rows, 0.01, axis=0), np.quantile(rows, 0.99, axis=0)
        span = np.where(high > low, high - low, 1.0)
        beyond = np.maximum(low - rows[worst[0]], rows[worst[0]] - high) / span
        column = int(beyond.argmax())
        if beyond[column] > 0:
            name = feature_names[column] if column < len(feature_names) else f"obs[{column}]"
            text += f"; the worst state's {name} lies {beyond[column]:.2f} spans outside the states' 1-99% range"
    return text + "; "


def divergence_cause(artifact: Any, claimed: QuantSpec, parity: dict[str, Any]) -> str:
    """The likely cause of a failed gate and its remedy, where the figures name one: an int8 graph that quantizes
    its raw observation per tensor (one step for features whose ranges differ widely), which its claim does not
    model (a weights-only claim: ``ort-int8-dynamic``). A claim with activations models the graph's observation
    grid (or its fp32 observation), so that cause is not theirs."""
    ratio = parity.get("observation_span_ratio", 1.0)
    if artifact.kind == "c" or "max_error_steps" not in parity or ratio < 4 or claimed.precision != "int8":
        return ""
    if claimed.activations:  # the claim rounds the observation on the graph's grid, or keeps it in fp32 as it does
        return ""
    return (
        f"likely cause: the graph quantizes the raw observation to int8 per tensor, one step for features whose "
        f"ranges differ {ratio:.0f}x (the fine ones lose their resolution); remedy: c-int8 (its gate models that "
        "grid), or an agent that normalises its observations (VecNormalize); "
    )
