"""The handler half of every method whose jobs evaluate one existing agent (PTQ, deploy, QAT and AMP once trained,
a driver's planned jobs): which jobs a work holds, the agent loaded once per process, and each job evaluated by its
spec method's registered evaluator (``methods/protocol.register_evaluator``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from quarl_bench.jobs.grids import Variants
from quarl_bench.methods.protocol import THIS_MACHINE, OfAgent, evaluator, register
from quarl_bench.types import AgentRef, EvalResult, Job, QuantSpec
from quarl_bench.zoo.return_bounds import ReturnBounds, check_returns

if TYPE_CHECKING:
    from quarl_bench.jobs.work import Work
    from quarl_bench.zoo.agents import LoadedAgent


class AgentEvaluation:
    """The handler of methods whose jobs evaluate one agent (the config's ``ref``): per evaluation seed its fp32
    reference and one job per spec (``specs``), of the config's method; the agent is loaded once per work and each
    job evaluated by its method's evaluator (quantize and play, deploy an artifact, the random policy)."""

    def agent(self, work: Work) -> AgentRef:
        return work.config.ref

    def specs(self, config: Any) -> list[QuantSpec]:
        return list(config.specs)

    def variants(self, config: Any) -> Variants:
        """The jobs beside the specs' (deployed targets, other methods' specs): none by default."""
        return Variants()

    def jobs(self, work: Work, agent: AgentRef | None) -> list[Job]:
        from quarl_bench.jobs.grids import build_jobs

        assert agent is not None
        config = work.config
        return build_jobs(agent, self.specs(config), work.settings, config.method, self.variants(config))

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[Job]) -> Iterator[EvalResult]:
        assert agent is not None
        loaded = loaded_agent(agent)
        for job in jobs:
            yield evaluator(job.method)(loaded, job, work.driver, eval_workers=work.eval_workers)


AGENTS_KEPT = 8  # loaded agents kept per process: a driver deals many agents' batches as small works, interleaved
_loaded: dict[AgentRef, LoadedAgent] = {}


def loaded_agent(ref: AgentRef) -> LoadedAgent:
    """The agent loaded, once per process for its next works (the fp32 policy is never changed: quantizing copies
    it); the least recently used one is dropped beyond :data:`AGENTS_KEPT`."""
    from quarl_bench.zoo.forms import load_agent

    if ref in _loaded:
        _loaded[ref] = _loaded.pop(ref)  # most recently used last
    else:
        while len(_loaded) >= AGENTS_KEPT:
            del _loaded[next(iter(_loaded))]
        _loaded[ref] = load_agent(ref)
    return _loaded[ref]


class TrainedAgentEvaluation(AgentEvaluation):
    """:class:`AgentEvaluation` of an agent the method trains first (``train``), or finds in the cache."""

    ray = THIS_MACHINE  # the trained agent goes to this machine's cache

    def train(self, config: Any, cache: Any) -> AgentRef:
        raise NotImplementedError

    def agent(self, work: Work) -> AgentRef:
        return self.train(work.config, work.cache)


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
        from quarl_bench.statistics.wording import spec_name

        for result in super().produce(work, agent, jobs):
            check_returns(work.config.bounds, result.episode_rewards, result.episode_ids, spec_name(result.job.spec))
            yield result
