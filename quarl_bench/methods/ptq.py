"""Post-training quantization: quantize a copy of the agent's policy per the job's spec and evaluate it.

Every method that evaluates an agent ends here: QAT and AMP agents are evaluated the same way once trained (their
jobs carry their method), and :class:`AgentEvaluation` is the handler half they share.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from gymnasium import spaces

from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.calibration import states_hash, visited_states
from quarl_bench.evaluation.evaluate import evaluate
from quarl_bench.evaluation.fixed_states import fixed_state_fidelity, fixed_states
from quarl_bench.evaluation.margins import MARGIN_STATES, margin_change
from quarl_bench.evaluation.workers import evaluate_in_workers
from quarl_bench.methods.protocol import OfAgent, evaluator, register, register_evaluator
from quarl_bench.provenance import agent_provenance
from quarl_bench.quant.layers import unquantized_modules
from quarl_bench.quant.prune import nonzero_weights
from quarl_bench.quant.quantize import acting_bytes, quantize, weight_profile
from quarl_bench.types import CALIBRATION_SEED, AgentRef, EvalResult, Job, QuantSpec
from quarl_bench.zoo.agents import LoadedAgent
from quarl_bench.zoo.return_bounds import ReturnBounds, check_returns

if TYPE_CHECKING:
    from quarl_bench.work import Work

PTQ_METHODS = ("ptq", "mixed")


@dataclass(frozen=True)
class PTQConfig(OfAgent):
    """Post-training quantization of an existing agent: its fp32 reference and one job per spec, per evaluation
    seed (the random policy's too with ``EvalSettings.random_baseline``).

    :param specs: PTQ specs (method ``ptq``, or ``mixed`` for a per-layer allocation).
    """

    specs: tuple[QuantSpec, ...] = ()
    method: ClassVar[str] = "ptq"

    def __post_init__(self) -> None:
        for spec in self.specs:
            if spec.method not in PTQ_METHODS:
                raise QuarlError(f"bad PTQ spec method {spec.method!r}: expected one of {', '.join(PTQ_METHODS)}")


class AgentEvaluation:
    """The handler of methods whose jobs evaluate one agent (the config's ``ref``): per evaluation seed its fp32
    reference and one job per spec (``specs``), of the config's method; the agent is loaded once per work and each
    job evaluated by its spec method's evaluator (quantize and play, deploy an artifact, the random policy)."""

    remote = True

    def agent(self, work: Work) -> AgentRef:
        return work.config.ref

    def specs(self, config: Any) -> list[QuantSpec]:
        return list(config.specs)

    def jobs(self, work: Work, agent: AgentRef | None) -> list[Job]:
        from quarl_bench.grids import build_jobs

        assert agent is not None
        return build_jobs(agent, self.specs(work.config), work.settings, work.config.method)

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[Job]) -> Iterator[EvalResult]:
        assert agent is not None
        loaded = loaded_agent(agent)
        for job in jobs:
            yield evaluator(job.spec.method)(loaded, job, work.driver, eval_workers=work.eval_workers)


AGENTS_KEPT = 8  # loaded agents kept per process: a driver deals many agents' batches as small works, interleaved
_loaded: dict[AgentRef, LoadedAgent] = {}


def loaded_agent(ref: AgentRef) -> LoadedAgent:
    """The agent loaded, once per process for its next works (the fp32 policy is never changed: quantizing copies
    it); the least recently used one is dropped beyond :data:`AGENTS_KEPT`."""
    from quarl_bench.zoo.agents import load_agent

    if ref in _loaded:
        _loaded[ref] = _loaded.pop(ref)  # most recently used last
    else:
        while len(_loaded) >= AGENTS_KEPT:
            del _loaded[next(iter(_loaded))]
        _loaded[ref] = load_agent(ref)
    return _loaded[ref]


class TrainedAgentEvaluation(AgentEvaluation):
    """:class:`AgentEvaluation` of an agent the method trains first (``train``), or finds in the cache."""

    remote = False  # the trained agent goes to this machine's cache

    def train(self, config: Any, cache: Any) -> AgentRef:
        raise NotImplementedError

    def agent(self, work: Work) -> AgentRef:
        return self.train(work.config, work.cache)


@register(PTQConfig)
class PTQHandler(AgentEvaluation):
    pass


@dataclass(frozen=True)
class PlannedJobs(OfAgent):
    """Jobs of one agent exactly as a driver planned them (certify's paired batches): PTQ, deploy or random-policy
    jobs, each evaluated by its spec method's evaluator. With ``bounds``, a result with a return outside them is
    refused before it is stored (a finite-sample certification rests on them).

    :param jobs: the jobs, with the store's keys.
    :param bounds: every episode's return must lie in these; None: no check.
    """

    jobs: tuple[Job, ...] = ()
    bounds: ReturnBounds | None = None
    method: ClassVar[str] = "ptq"


@register(PlannedJobs, named=False)
class PlannedJobsHandler(AgentEvaluation):
    def jobs(self, work: Work, agent: AgentRef | None) -> list[Job]:
        return list(work.config.jobs)

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[Job]) -> Iterator[EvalResult]:
        from quarl_bench.methods.certify import spec_name

        for result in super().produce(work, agent, jobs):
            check_returns(work.config.bounds, result.episode_rewards, result.episode_ids, spec_name(result.job.spec))
            yield result


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
    discrete = isinstance(fp32_policy.action_space, spaces.Discrete)  # only these have decision margins
    record_states = MARGIN_STATES if discrete else 0
    if eval_workers > 1:
        episodes = evaluate_in_workers(
            policy,
            agent.make_env,
            job.n_envs,
            eval_workers,
            job.episodes,
            job.seed,
            job.actions,
            reference,
            job.obs_noise,
            record_states,
        )
    else:
        env = agent.make_env(job.n_envs, job.seed)
        try:
            episodes = evaluate(
                policy,
                env,
                job.episodes,
                job.seed,
                job.actions,
                reference=reference,
                obs_noise=job.obs_noise,
                record_states=record_states,
            )
        finally:
            env.close()
    margins = margin_change(policy, reference, episodes.states)
    if reference is not None and agent.ref.algo != "onnx":  # the same fp32-visited states for every precision
        states = fixed_states(agent.ref.content_hash, fp32_policy, agent.make_env)
        margins |= fixed_state_fidelity(policy, reference, states)
    return EvalResult(
        job=job,
        episode_rewards=tuple(episodes.rewards),
        episode_lengths=tuple(episodes.lengths),
        episode_ids=tuple(episodes.identities),
        wall_seconds=episodes.wall_seconds,
        layers=layers,
        action_agreement=episodes.agreement | margins,
        provenance=driver | agent_provenance(agent.ref) | not_quantized(fp32_policy, job) | calibration,
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
