"""What every agent-evaluating method shares once it has made its policy: play the job's seeded episodes on the
agent's envs and turn them into the job's row. An evaluator is "make the policy" plus :func:`play_job` and
:func:`job_result`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from quarl_bench.action_modes import ActionMode
from quarl_bench.evaluation.evaluate import Episodes, evaluate
from quarl_bench.evaluation.workers import evaluate_in_workers
from quarl_bench.store.provenance import agent_provenance
from quarl_bench.types import EvalResult, Job
from quarl_bench.zoo.agents import LoadedAgent


def play_job(
    agent: LoadedAgent,
    job: Job,
    policy: Any,
    reference: Any = None,
    eval_workers: int = 1,
    record_states: int = 0,
    actions: ActionMode | None = None,
    make_env: Callable[[int, int], Any] | None = None,
) -> Episodes:
    """Play ``job``'s episodes (its envs, seed, action mode and observation noise) with ``policy``.

    :param reference: the fp32 policy to measure action agreement against (None: none measured).
    :param eval_workers: processes that play the envs (above 1: forked, each with its own policy copy).
    :param record_states: keep a uniform sample of up to this many states the policy acted on.
    :param actions: the action mode instead of the job's (the random policy acts greedily on its own draws).
    :param make_env: the envs instead of the agent's ``make_env`` (an artifact plays on the un-normalised envs).
    """
    make_env = make_env or agent.make_env
    if job.perturbation:
        make_env = perturbed(agent, job, make_env)
    if job.judge:
        from quarl_bench.evaluation.judges import judged_envs

        make_env = judged_envs(make_env, job.judge)
    actions = actions or job.actions
    if eval_workers > 1:
        return evaluate_in_workers(
            policy,
            make_env,
            job.n_envs,
            eval_workers,
            job.episodes,
            job.seed,
            actions,
            reference,
            job.obs_noise,
            record_states,
        )
    env = make_env(job.n_envs, job.seed)
    try:
        return evaluate(
            policy,
            env,
            job.episodes,
            job.seed,
            actions,
            reference=reference,
            obs_noise=job.obs_noise,
            record_states=record_states,
        )
    finally:
        env.close()


def perturbed(agent: LoadedAgent, job: Job, make_env: Callable[[int, int], Any]) -> Callable[[int, int], Any]:
    """``make_env`` under the job's condition; observation noise scaled per dimension by the spread of the fp32
    policy's fixed-state set (a set every job of the agent shares)."""
    from quarl_bench.evaluation.perturbations import parse_perturbation, perturbed_envs

    condition = parse_perturbation(job.perturbation)
    scale = None
    if any(kind.scaled for kind in condition.touching("observation")):  # they scale by each dimension's spread
        from quarl_bench.evaluation.fixed_states import fixed_states

        states = fixed_states(agent.ref.content_hash, agent.model.policy, agent.make_env)
        scale = np.maximum(np.asarray(states, dtype=np.float32).reshape(len(states), -1).std(axis=0), 1e-6)
    return perturbed_envs(make_env, condition, scale)


def job_result(agent: LoadedAgent, job: Job, episodes: Episodes, driver: dict[str, Any], **fields: Any) -> EvalResult:
    """``job``'s row from its episodes, with the driver's and the agent's provenance; ``fields`` adds to the row
    (``layers``, ``weights``), and ``provenance`` and ``action_agreement`` to what the episodes measured."""
    provenance = driver | agent_provenance(agent.ref) | fields.pop("provenance", {})
    agreement = episodes.agreement | fields.pop("action_agreement", {})
    return EvalResult(
        job=job,
        episode_rewards=tuple(episodes.rewards),
        episode_lengths=tuple(episodes.lengths),
        episode_ids=tuple(episodes.identities),
        episode_outcomes={name: tuple(values) for name, values in episodes.outcomes.items()},
        wall_seconds=episodes.wall_seconds,
        action_agreement=agreement,
        provenance=provenance,
        **fields,
    )
