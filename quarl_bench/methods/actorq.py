"""ActorQ (method ``actorq``): one distributed run per config, an fp32 learner with quantized actors on Ray
(``actorq/driver.py``), stored as one row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from quarl_bench.actorq.config import ActorQConfig
from quarl_bench.actorq.driver import actorq_result, degenerate, job_for, run_actorq
from quarl_bench.errors import Interrupted, QuarlError
from quarl_bench.methods.protocol import NO_RAY, register
from quarl_bench.types import AgentRef, EvalResult, Job

if TYPE_CHECKING:
    from quarl_bench.jobs.work import Work


@register(ActorQConfig)
class ActorQHandler:
    """One ActorQ run (:func:`run_actorq`) and its row. A run the learner's failure ended keeps the evaluations it
    made: that row is produced, then the failure raised. A run that trained nothing (no actor steps or no learner
    update: too short a ``max_seconds``) is not stored: it would measure no speed-up."""

    ray = NO_RAY  # a run starts its own Ray cluster

    def agent(self, work: Work) -> None:
        return None

    def jobs(self, work: Work, agent: AgentRef | None) -> list[Job]:
        return [job_for(work.config)]

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[Job]) -> Iterator[EvalResult]:
        outcome = run_actorq(work.config, work.address, work.progress, work.log_path)
        if outcome.error and outcome.curve:
            yield actorq_result(work.config, outcome)
        if outcome.interrupted:
            raise Interrupted(
                f"ActorQ run stopped by {outcome.interrupted}: {len(outcome.curve)} evaluations kept in the store, "
                "marked interrupted (no speed-up is derived from them; run it again to replace them)"
            )
        if outcome.error:
            raise QuarlError(f"ActorQ run stopped: {outcome.error}; {len(outcome.curve)} evaluations kept in the store")
        empty = degenerate(outcome)
        if empty:
            config = work.config
            raise QuarlError(
                f"ActorQ run {config.algo}/{config.env_id} {config.actor_precision} seed {config.seed} trained nothing "
                f"({empty}): not stored, no speed-up measured; give it a longer --max-seconds"
            )
        yield actorq_result(work.config, outcome)
