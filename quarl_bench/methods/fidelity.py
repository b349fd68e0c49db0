"""Closed-loop fidelity (method ``fidelity``): the fp32 and each quantized policy played side by side from the same
seeds, one episode per env; per episode, the first step whose greedy actions differ and the first whose
observations part by more than a threshold; and, on the fp32 trajectories, the action and hidden-state error per
step of the episode (:mod:`~quarl_bench.evaluation.fidelity_over_time`). Its rows go to the store's ``fidelity``
table."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, ClassVar

from quarl_bench.errors import QuarlError
from quarl_bench.jobs.spec_options import SPEC_GRID, SPEC_RECIPE
from quarl_bench.methods.protocol import OfAgent, SideRow, register
from quarl_bench.types import AgentRef, Job, QuantSpec

if TYPE_CHECKING:
    from quarl_bench.jobs.work import Work


@dataclass(frozen=True)
class FidelityConfig(OfAgent):
    """Side-by-side episodes of an agent at fp32 and at each spec.

    :param threshold: observations part when max |fp32 - quantized| exceeds this.
    """

    specs: tuple[QuantSpec, ...] = ()
    threshold: float = 0.1
    method: ClassVar[str] = "fidelity"
    spec_flags: ClassVar[tuple[str, ...]] = (SPEC_GRID, SPEC_RECIPE)  # its policies are quantized as PTQ's

    def __post_init__(self) -> None:
        if not self.threshold >= 0:
            raise QuarlError(f"bad threshold {self.threshold}: expected a distance >= 0")


@dataclass(frozen=True)
class FidelityJob:
    """One PTQ job played side by side with its fp32 twin; its row's key holds the threshold too."""

    job: Job
    threshold: float

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.job.key}:{self.threshold!r}".encode()).hexdigest()[:24]


@register(FidelityConfig)
class FidelityHandler:
    table = "fidelity"

    def agent(self, work: Work) -> AgentRef:
        return work.config.ref

    def jobs(self, work: Work, agent: AgentRef | None) -> list[FidelityJob]:
        from quarl_bench.jobs.grids import build_jobs

        assert agent is not None
        config = work.config
        return [FidelityJob(job, config.threshold) for job in build_jobs(agent, list(config.specs), work.settings)]

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[FidelityJob]) -> Iterator[SideRow]:
        from quarl_bench.evaluation.fidelity import side_by_side
        from quarl_bench.evaluation.fidelity_over_time import over_time
        from quarl_bench.methods.ptq import quantized
        from quarl_bench.store.provenance import agent_provenance
        from quarl_bench.zoo.forms import load_agent

        assert agent is not None
        loaded = load_agent(agent)
        for item in jobs:
            job = item.job
            policy, _, calibration = quantized(loaded, job.spec)
            reference_env, env = loaded.make_env(job.n_envs, job.seed), loaded.make_env(job.n_envs, job.seed)
            fixed_env = loaded.make_env(job.n_envs, job.seed)
            try:
                found = side_by_side(
                    loaded.model.policy, policy, reference_env, env, item.threshold, job.obs_noise, job.seed
                )
                label = " ".join(filter(None, (job.spec.precision, job.spec.recipe_label())))
                steps = over_time(loaded.model.policy, policy, fixed_env, label)
            finally:
                reference_env.close()
                env.close()
                fixed_env.close()
            row = {
                "key": item.key,
                "job_key": job.key,
                "algo": agent.algo,
                "env_id": agent.env_id,
                "precision": job.spec.precision,
                "agent_hash": agent.content_hash,
                "seed": job.seed,
                "episodes": job.episodes,
                "threshold": item.threshold,
                "obs_noise": job.obs_noise,
                "first_action": found.first_action,
                "first_obs": found.first_obs,
                "lengths": found.lengths,
                "over_time": steps.as_row(),
                "provenance": work.driver | agent_provenance(agent) | calibration,
                "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            }
            yield SideRow("fidelity", row)
