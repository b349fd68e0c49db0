"""Post-training quantization: quantize a copy of the agent's policy per the job's spec and evaluate it.

Every method ends here: QAT and AMP agents are evaluated the same way once trained (their jobs carry their method).
"""

from __future__ import annotations

import os
from typing import Any

from gymnasium import spaces

from quarl_bench.eval_workers import evaluate_in_workers
from quarl_bench.evaluate import evaluate
from quarl_bench.margins import MARGIN_STATES, margin_change
from quarl_bench.provenance import agent_provenance
from quarl_bench.quant.ptq import acting_bytes, quantize, weight_profile
from quarl_bench.types import EvalResult, Job
from quarl_bench.zoo.agents import LoadedAgent

EVAL_WORKERS_ENV = "QUARL_EVAL_WORKERS"


def evaluate_job(agent: LoadedAgent, job: Job, driver: dict[str, Any]) -> EvalResult:
    """Quantize a copy of the agent's policy per ``job.spec`` and play ``job``'s episodes with it.

    :param driver: the driver's provenance (command, git state, versions), stored with the row.
    """
    fp32_policy = agent.model.policy
    fp32_policy.set_training_mode(False)
    policy, layers = quantize(fp32_policy, job.algo, job.spec)
    reference = None if job.spec.is_identity else fp32_policy
    discrete = isinstance(fp32_policy.action_space, spaces.Discrete)  # only these have decision margins
    record_states, workers = MARGIN_STATES if discrete else 0, eval_workers()
    if workers > 1:
        episodes = evaluate_in_workers(
            policy,
            agent.make_env,
            job.n_envs,
            workers,
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
    margins = margin_change(policy, reference, job.algo, episodes.states)
    return EvalResult(
        job=job,
        episode_rewards=tuple(episodes.rewards),
        episode_lengths=tuple(episodes.lengths),
        wall_seconds=episodes.wall_seconds,
        layers=layers,
        action_agreement=episodes.agreement | margins,
        provenance=driver | agent_provenance(agent.ref),
        weights=weight_profile(fp32_policy, job.algo) | {"acting_bytes": acting_bytes(fp32_policy, job.algo, job.spec)},
    )


def eval_workers() -> int:
    """Processes that play an evaluation's envs (``--eval-workers``, through ``QUARL_EVAL_WORKERS`` so pool and Ray
    workers see it too); 1: every env in this process."""
    return int(os.environ.get(EVAL_WORKERS_ENV, "1") or 1)
