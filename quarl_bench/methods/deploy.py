"""Deployment (method ``deploy``): build a backend's artifact of the agent's whole policy, play it in the loop on
the job's seeded episodes, time it and weigh it.

The artifact sees the raw observations (the env under VecNormalize); the fp32 SB3 policy sees them normalised,
as always, for the action agreement. Calibration states for ``ort-int8-static`` come from the fp32 policy playing
its own episodes, seeded apart from the evaluation episodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from quarl_bench.deploy.targets import BACKENDS, check_target
from quarl_bench.errors import QuarlError
from quarl_bench.jobs.grids import Variants
from quarl_bench.methods.agent_evaluation import AgentEvaluation
from quarl_bench.methods.protocol import OfAgent, register, register_evaluator
from quarl_bench.registry import REFERENCE_RULES
from quarl_bench.types import (
    CALIBRATION_SEED,
    DEFAULT_CALIBRATION_STATES,
    FP32_TARGET,
    DeployTarget,
    EvalResult,
    Job,
    QuantSpec,
)

CALIBRATION_SEED_OFFSET = 10_000  # calibration episodes never share seeds with evaluated ones


@dataclass(frozen=True)
class DeployConfig(OfAgent):
    """Deployment of an existing agent: the torch-fp32 reference and one artifact per target.

    :param targets: the artifacts to build (a backend each, with its calibration where it calibrates).
    """

    targets: tuple[DeployTarget, ...] = ()
    method: ClassVar[str] = "deploy"

    def __post_init__(self) -> None:
        for target in self.targets:
            check_target(target)


REFERENCE_RULES[DeployConfig.method] = lambda fp32: replace(fp32, target=FP32_TARGET)  # the torch-fp32 artifact


@register(DeployConfig)
class DeployHandler(AgentEvaluation):
    def specs(self, config: DeployConfig) -> list[QuantSpec]:
        return []

    def variants(self, config: DeployConfig) -> Variants:
        return Variants(targets=config.targets)


def target_calibration(agent, target: DeployTarget) -> np.ndarray | None:
    """The observations ``target``'s artifact calibrates on (a calibrated backend's: its claim's states), else None.
    The same for every job: the artifact each batch plays is the one export ships, not one per batch seed."""
    return claim_calibration_states(agent, target.calibration_states) if target.calibration_states else None


def claim_calibration_states(agent, count: int) -> np.ndarray:
    """The ``count`` states a W8A8 fake-quant policy calibrates on
    (:func:`~quarl_bench.methods.ptq.calibration_states`) as raw observations (VecNormalize undone: the artifact
    normalises inside; a recurrent policy's observation part): ``ort-int8-static`` calibrates on them, so its ranges
    are its claim's (on other states its gate missed by 5.5 steps on sac Pendulum)."""
    from quarl_bench.deploy.export import split_normalizer
    from quarl_bench.methods.ptq import calibration_states
    from quarl_bench.zoo.policy import as_policy

    states = as_policy(agent.model.policy).observations_of(calibration_states(agent, count))
    env = agent.make_env(1, 0)
    _, normalizer = split_normalizer(env)
    env.close()
    if normalizer is None or not normalizer.norm_obs:
        return states
    from quarl_bench.observation_layout import applied_flat

    space = agent.model.policy.observation_space
    return np.asarray(applied_flat(space, states, normalizer.unnormalize_obs), dtype=np.float32)


def deploy_calibration_states(agent, count: int, seed: int, n_envs: int = 4) -> np.ndarray:
    """``count`` raw observations the fp32 policy visits, playing from ``seed``."""
    from quarl_bench.deploy.export import split_normalizer
    from quarl_bench.observation_layout import as_flat
    from quarl_bench.zoo.policy import normalized_policy
    from quarl_bench.zoo.quiet import native_output_silenced

    space = agent.model.policy.observation_space
    env = agent.make_env(n_envs, seed)
    raw, normalizer = split_normalizer(env)
    reference = normalized_policy(agent.model.policy, normalizer)
    with native_output_silenced():  # pybullet envs print from C when first reset
        states: list[np.ndarray] = []
        obs = raw.reset()
        memory, starts = None, np.ones(n_envs, dtype=bool)  # a recurrent policy carries its state
        while sum(len(s) for s in states) < count:
            states.append(np.array(as_flat(space, obs)))  # a deployed policy takes one array (a Dict's keys flat)
            actions, memory = reference.predict(obs, memory, starts, deterministic=True)
            obs, _, dones, _ = raw.step(actions)
            starts = np.asarray(dones, dtype=bool)
    env.close()
    return np.concatenate(states)[:count]


W8A8_CALIBRATION = {
    "states": DEFAULT_CALIBRATION_STATES,
    "seed": CALIBRATION_SEED,
    "method": "minmax",
    "source": "the W8A8 fake-quant policy's calibration states",
}
ARTIFACTS_KEPT = 4  # built artifacts kept per process: certification plays one artifact in many batches
_artifacts: dict[tuple[str, DeployTarget], tuple[Any, float]] = {}


def built_artifact(
    agent, target: DeployTarget, sample: np.ndarray, calibration: np.ndarray | None
) -> tuple[Any, float]:
    """``target``'s artifact of the agent and the seconds its build took. No artifact depends on the job (each
    calibrates on fixed states: ``calibration``, :func:`claim_calibration_states`, or the W8A8 network states),
    so each is built once per process, agent and target."""
    from quarl_bench.deploy.backends import build
    from quarl_bench.deploy.export import deployable, split_normalizer

    key = (agent.ref.content_hash, replace(target, artifact=""))
    if key in _artifacts:
        return _expected(_artifacts[key], target)
    env = agent.make_env(1, 0)
    raw, normalizer = split_normalizer(env)
    env.close()
    module = deployable(agent.model.policy, raw.observation_space, normalizer)
    network_states = None
    if target.backend in BACKENDS.names(w8a8_states=True):
        from quarl_bench.evaluation.calibration import visited_states

        network_states = visited_states(agent.model.policy, agent.make_env, DEFAULT_CALIBRATION_STATES)
    start = time.perf_counter()
    method = target.calibration_method or "minmax"
    artifact = build(target.backend, module, sample, calibration, method, network_states)
    found = (artifact, time.perf_counter() - start)
    while len(_artifacts) >= ARTIFACTS_KEPT:
        del _artifacts[next(iter(_artifacts))]
    _artifacts[key] = found
    return _expected(found, target)


def _expected(found: tuple[Any, float], target: DeployTarget) -> tuple[Any, float]:
    """``found`` when its bytes are those ``target`` names (or it names none).

    :raises QuarlError: for other bytes: a job certified on one artifact is never played on another.
    """
    if target.artifact and found[0].sha256 != target.artifact:
        raise QuarlError(
            f"the {target.backend} artifact built to play has sha256 {found[0].sha256[:16]}, not the "
            f"{target.artifact[:16]} its job names: this backend's build is not deterministic here, so its "
            "certificate cannot be measured in another process; certify it where it was built"
        )
    return found


@register_evaluator("deploy")
def evaluate_job(agent, job: Job, driver: dict[str, Any], eval_workers: int = 1) -> EvalResult:
    """Build ``job.target``'s artifact, evaluate it on ``job``'s episodes, time and weigh it."""
    from quarl_bench.deploy.backends import int8_weight_summary, runner
    from quarl_bench.deploy.export import split_normalizer
    from quarl_bench.deploy.machine import machine_record
    from quarl_bench.deploy.timing import latency, peak_memory_mb, throughput
    from quarl_bench.evaluation.evaluate import torch_thread_count
    from quarl_bench.methods.playing import job_result, play_job
    from quarl_bench.zoo.policy import artifact_policy, normalized_policy

    target = job.target
    assert target is not None  # a deploy job has one (Job checks)
    policy = agent.model.policy
    policy.set_training_mode(False)
    calibration = target_calibration(agent, target)
    sample = deploy_calibration_states(agent, 64, job.seed + CALIBRATION_SEED_OFFSET)
    artifact, build_seconds = built_artifact(agent, target, sample[:1], calibration)
    probe = agent.make_env(1, 0)
    normalizer = split_normalizer(probe)[1]  # the agent's saved statistics: the same for every env it makes
    probe.close()
    with torch_thread_count(1):
        run = runner(artifact, threads=1)
        reference = None if target.backend == "torch-fp32" else normalized_policy(policy, normalizer)
        raw_envs = lambda n_envs, seed: split_normalizer(agent.make_env(n_envs, seed))[0]  # noqa: E731
        episodes = play_job(
            agent,
            job,
            artifact_policy(run, policy.action_space, policy.observation_space),
            reference,
            make_env=raw_envs,
        )
        timing = latency(run, sample[0])
        timing["batch64_obs_per_s"] = throughput(run, sample)
    deployment = {
        "backend": target.backend,
        "artifact_sha256": artifact.sha256,
        "artifact_bytes": artifact.nbytes,
        "artifact_kind": artifact.kind,
        "build_seconds": build_seconds,
        "latency": timing,
        "peak_rss_mb": peak_memory_mb(artifact, sample[0]),
        "calibration": {"states": target.calibration_states, "method": target.calibration_method}
        if calibration is not None
        else W8A8_CALIBRATION
        if target.backend in BACKENDS.names(w8a8_states=True)
        else None,
        "graph": int8_weight_summary(artifact) if artifact.kind == "onnx" else {},
        "threads": 1,
        "machine": machine_record(),
    }
    return job_result(agent, job, episodes, driver, provenance={"deployment": deployment})
