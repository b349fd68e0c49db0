"""Post-training quantization: quantize a copy of the agent's policy per the job's spec and evaluate it.

Every method ends here: QAT and AMP agents are evaluated the same way once trained (their jobs carry their method).
"""

from __future__ import annotations

from typing import Any

from quarl_bench.evaluate import evaluate
from quarl_bench.provenance import agent_provenance
from quarl_bench.quant.ptq import quantize, weight_profile
from quarl_bench.types import EvalResult, Job
from quarl_bench.zoo.agents import LoadedAgent


def evaluate_job(agent: LoadedAgent, job: Job, driver: dict[str, Any]) -> EvalResult:
    """Quantize a copy of the agent's policy per ``job.spec`` and play ``job``'s episodes with it.

    :param driver: the driver's provenance (command, git state, versions), stored with the row.
    """
    fp32_policy = agent.model.policy
    fp32_policy.set_training_mode(False)
    policy, layers = quantize(fp32_policy, job.algo, job.spec)
    reference = None if job.spec.is_identity else fp32_policy
    env = agent.make_env(job.n_envs, job.seed)
    try:
        episodes = evaluate(policy, env, job.episodes, job.seed, job.actions, reference=reference, model=agent.model)
    finally:
        env.close()
    return EvalResult(
        job=job,
        episode_rewards=tuple(episodes.rewards),
        episode_lengths=tuple(episodes.lengths),
        wall_seconds=episodes.wall_seconds,
        layers=layers,
        action_agreement=episodes.agreement,
        provenance=driver | agent_provenance(agent.ref),
        weights=weight_profile(fp32_policy, job.algo),
    )
