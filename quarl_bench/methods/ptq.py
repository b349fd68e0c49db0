"""Post-training quantization: quantize a copy of the agent's policy per the job's spec and evaluate it.

This is also how QAT and AMP agents are evaluated once trained (their jobs carry their method): ``evaluate_job`` is
the evaluator of every spec method that registers none (``methods/agent_evaluation.py`` holds the handler half the
agent-evaluating methods share).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from quarl_bench.evaluation.calibration import states_hash, visited_states
from quarl_bench.evaluation.fixed_states import fixed_state_fidelity, fixed_states
from quarl_bench.evaluation.margins import MARGIN_STATES, margin_change
from quarl_bench.jobs.grids import Variants
from quarl_bench.jobs.spec_options import SPEC_GRID, SPEC_RECIPE
from quarl_bench.methods.agent_evaluation import AgentEvaluation
from quarl_bench.methods.playing import job_result, play_job
from quarl_bench.methods.protocol import OfAgent, register, register_evaluator
from quarl_bench.quant.layers import unquantized_modules
from quarl_bench.quant.prune import nonzero_weights
from quarl_bench.quant.quantize import acting_bytes, quantize, weight_profile
from quarl_bench.registry import REFERENCE_RULES
from quarl_bench.types import (
    CALIBRATION_SEED,
    AgentRef,
    EvalResult,
    Job,
    QuantSpec,
)
from quarl_bench.zoo.agents import LoadedAgent
from quarl_bench.zoo.policy import as_policy

MIXED = "mixed"  # a per-layer allocation's jobs (``quarl-bench mixed``): played as PTQ, against PTQ's fp32 row


@dataclass(frozen=True)
class PTQConfig(OfAgent):
    """Post-training quantization of an existing agent: its fp32 reference and one job per spec, per evaluation
    seed (the random policy's too with ``EvalSettings.random_baseline``).

    :param specs: PTQ specs.
    :param mixed: per-layer allocations a mixed-precision search found: their jobs are of method ``mixed``.
    """

    specs: tuple[QuantSpec, ...] = ()
    mixed: tuple[QuantSpec, ...] = ()
    method: ClassVar[str] = "ptq"
    spec_flags: ClassVar[tuple[str, ...]] = (SPEC_GRID, SPEC_RECIPE)  # quantize and play applies all of them
    groups_cells: ClassVar[tuple[str, ...]] = ("ptq", MIXED)  # one agent's cells, split over workers

    @classmethod
    def from_jobs(cls, ref: AgentRef, jobs: list[Job]) -> PTQConfig:
        """A share of an agent's grouped jobs: its quantized specs and its mixed allocations."""
        specs = tuple(job.spec for job in jobs if job.method == cls.method and not job.spec.is_identity)
        return cls(ref, specs, tuple(job.spec for job in jobs if job.method == MIXED))


REFERENCE_RULES[MIXED] = lambda fp32: replace(fp32, method=PTQConfig.method)


@register(PTQConfig)
class PTQHandler(AgentEvaluation):
    def variants(self, config: PTQConfig) -> Variants:
        return Variants(others={MIXED: config.mixed})


@register_evaluator("ptq")
def evaluate_job(agent: LoadedAgent, job: Job, driver: dict[str, Any], eval_workers: int = 1) -> EvalResult:
    """Quantize a copy of the agent's policy per ``job.spec`` and play ``job``'s episodes with it.

    :param driver: the driver's provenance (command, git state, versions), stored with the row.
    :param eval_workers: processes that play the envs (above 1: forked, each with its own policy copy).
    """
    fp32_policy = agent.model.policy
    fp32_policy.set_training_mode(False)
    policy, layers, calibration = quantized(agent, job.spec)
    reference = None if job.spec.is_identity else fp32_policy
    record_states = MARGIN_STATES if as_policy(fp32_policy).discrete else 0  # only these have decision margins
    episodes = play_job(agent, job, policy, reference, eval_workers, record_states)
    margins = margin_change(policy, reference, episodes.states)
    if reference is not None and as_policy(fp32_policy).torch_layers:  # the same fp32-visited states for all
        states = fixed_states(agent.ref.content_hash, fp32_policy, agent.make_env)
        margins |= fixed_state_fidelity(policy, reference, states)
    return job_result(
        agent,
        job,
        episodes,
        driver,
        layers=layers,
        action_agreement=margins,
        provenance=not_quantized(fp32_policy, job) | calibration,
        weights=weight_profile(fp32_policy)
        | {"acting_bytes": acting_bytes(policy, job.spec), "nonzero_weights": nonzero_weights(policy)},
    )


# quantized copies kept per process (least recently used dropped): certify plays each spec in many batches, a
# driver interleaves many agents' specs, and a calibrated spec (GPTQ, learned rounding) costs seconds to redo
QUANTIZED_KEPT = 64
_quantized: dict[tuple[str, QuantSpec], tuple[Any, tuple, dict[str, Any]]] = {}


def quantized(agent: LoadedAgent, spec: QuantSpec) -> tuple[Any, tuple, dict[str, Any]]:
    """The agent's policy quantized per ``spec``, its layer statistics and calibration provenance; the same
    (deterministic) result is reused for the next jobs of that agent and spec, so a calibrated spec (GPTQ, learned
    rounding) is calibrated once however many batches certify plays with it."""
    key = (agent.ref.content_hash, spec)
    if key in _quantized:
        _quantized[key] = _quantized.pop(key)  # most recently used last
    else:
        fp32_policy = agent.model.policy
        calibration: dict[str, Any] = {}
        states = None
        if spec.calibrated:
            states = calibration_states(agent, spec.calibration_states)
            calibration = {
                "calibration": {"states": len(states), "seed": CALIBRATION_SEED, "hash": states_hash(states)}
            }
        policy, layers = quantize(fp32_policy, spec, states)
        while len(_quantized) >= QUANTIZED_KEPT:
            del _quantized[next(iter(_quantized))]
        _quantized[key] = (policy, layers, calibration)
    return _quantized[key]


_states: dict[tuple[str, int], Any] = {}


def calibration_states(agent: LoadedAgent, count: int) -> Any:
    """The agent's ``count`` calibration states (deterministic: played once per process, agent and count)."""
    key = (agent.ref.content_hash, count)
    if key not in _states:
        _states[key] = visited_states(agent.model.policy, agent.make_env, count)
    return _states[key]


def not_quantized(policy, job: Job) -> dict[str, list[str]]:
    """The acting modules a quantized job left in fp32 (norms, embeddings, recurrent cells), when there are any."""
    left = [] if job.spec.is_identity else unquantized_modules(policy)
    return {"not_quantized": left} if left else {}
