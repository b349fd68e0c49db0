"""One ActorQ run: start the learner, quantizer and actors on Ray, evaluate on a clock, store the outcome."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from quarl_bench.actorq.carbon import track_energy
from quarl_bench.actorq.config import ActorQConfig
from quarl_bench.actorq.exploration import exploration_levels
from quarl_bench.deploy.machine import load_before_run, load_record
from quarl_bench.jobs.ray_cluster import connect
from quarl_bench.store import ResultStore
from quarl_bench.store.provenance import driver_provenance
from quarl_bench.types import EvalResult, Job, QuantSpec


@dataclass
class RunOutcome:
    curve: list[dict[str, Any]] = field(default_factory=list)  # wall s, actor steps, updates, reward, episodes
    actors: list[dict[str, Any]] = field(default_factory=list)
    broadcast_bytes: int = 0
    broadcasts: int = 0
    restarts: int = 0
    wall_seconds: float = 0.0
    learner: dict[str, Any] = field(default_factory=dict)  # counters, and steps per actor
    final_rewards: list[float] = field(default_factory=list)
    energy: dict[str, Any] = field(default_factory=dict)
    mismatch: list[dict[str, float]] = field(default_factory=list)  # actor policy vs learner fp32, per pull
    learner_device: str = "cpu"
    error: str | None = None  # set when the learner (or the cluster) failed mid-run
    load: dict[str, Any] = field(default_factory=dict)  # the machine's load before the run started its processes


@dataclass(frozen=True)
class Cluster:
    """Handles to a running ActorQ system (for callbacks that inspect or disturb it)."""

    learner: Any
    quantizer: Any
    actors: list[Any]


def run_actorq(
    config: ActorQConfig, address: str | None = None, on_eval=None, log_path: Path | None = None
) -> RunOutcome:
    """Run one ActorQ training on Ray (a local cluster unless ``address``); ``on_eval(point, cluster)`` is called
    after each evaluation of the learner; Ray's own output goes to ``log_path`` when given."""
    import ray

    from quarl_bench.actorq.actor import Actor
    from quarl_bench.actorq.learner import Learner
    from quarl_bench.actorq.param_quantizer import ParameterQuantizer

    # Ray actor classes (@ray.remote): mypy applies no class decorator, so what it would see lacks .remote
    remote_learner: Any = Learner
    remote_quantizer: Any = ParameterQuantizer
    remote_actor: Any = Actor
    from quarl_bench.zoo.devices import training_device

    observation_space, action_space = config.env_spaces()
    device = training_device(config.learner_device, "learner device")
    # the load before Ray starts: during the run its own learner and actors keep the cores busy
    outcome = RunOutcome(learner_device=device, load=load_before_run())
    connect(address, log_path)
    try:
        arch = list(config.policy_arch)
        learner = remote_learner.options(num_gpus=1 if device == "cuda" else 0).remote(
            config.algo,
            config.env_id,
            arch,
            config.batch_size,
            config.samples_per_insert,
            config.seed,
            config.learning_starts,
            device,
        )
        obs_dim = int(np.prod(observation_space.shape))
        quantizer = remote_quantizer.remote(
            config.comm_bits, config.actor_precision, config.int8_backend, action_space, obs_dim, arch
        )
        ray.get(quantizer.publish.remote(learner.weights.remote()))
        outcome.broadcast_bytes = ray.get(quantizer.broadcast_nbytes.remote())
        actors = [
            remote_actor.remote(
                i,
                config.env_id,
                arch,
                config.actor_precision,
                config.int8_backend,
                level,
                config.pull_period,
                quantizer,
                learner,
                config.seed,
            )
            for i, level in enumerate(exploration_levels(action_space, config.n_actors))
        ]
        cluster = Cluster(learner, quantizer, actors)
        with track_energy() as energy:
            start = time.perf_counter()
            try:
                drive(config, cluster, outcome, start, on_eval)
                ray.get(learner.stop.remote())
            except ray.exceptions.RayError as error:  # the learner died or failed; keep what was measured
                outcome.error = f"learner failed: {describe(error)}"
            outcome.wall_seconds = time.perf_counter() - start
        outcome.energy = asdict(energy)
        try:
            outcome.mismatch = ray.get(quantizer.mismatch_series.remote())
            if outcome.error:
                return outcome
            outcome.restarts = ray.get(quantizer.restarts.remote())
            outcome.learner = ray.get(learner.counters.remote())
            outcome.final_rewards = ray.get(learner.evaluate.remote(config.eval_episodes))[0]
        except ray.exceptions.RayError as error:  # what the run measured is kept and stored with the failure
            outcome.error = outcome.error or f"after the run: {describe(error)}"
        return outcome
    finally:
        ray.shutdown()


def describe(error: Exception) -> str:
    """One line for a Ray failure: its kind and the first line of its message."""
    cause = getattr(error, "cause", None) or error  # a RayTaskError wraps the exception raised in the actor
    text = str(cause).strip()
    return f"{type(cause).__name__}: {text.splitlines()[0] if text else 'no message'}"[:300]


def drive(config: ActorQConfig, cluster: Cluster, outcome: RunOutcome, start: float, on_eval) -> None:
    """Start the actors, re-broadcast the learner's weights twice a second, evaluate every ``eval_every_s``."""
    import ray

    learner, quantizer, actors = cluster.learner, cluster.quantizer, cluster.actors
    runs = {actor.run.remote(config.max_actor_steps): actor for actor in actors}
    next_eval = start
    while runs:
        done, _ = ray.wait(list(runs), num_returns=len(runs), timeout=0.5)
        for ref in done:
            outcome.actors.append(ray.get(ref))
            runs.pop(ref)
        ray.get(quantizer.publish.remote(learner.weights.remote()))
        outcome.broadcasts += 1
        if time.perf_counter() >= next_eval or not runs:
            rewards, steps, updates = ray.get(learner.evaluate.remote(config.eval_episodes))
            reward = float(np.mean(rewards))
            point = {
                "seconds": time.perf_counter() - start,
                "actor_steps": steps,
                "updates": updates,
                "reward": reward,
                "episodes": [float(r) for r in rewards],
            }
            outcome.curve.append(point)
            if on_eval:
                on_eval(point, cluster)
            next_eval = time.perf_counter() + config.eval_every_s
            if config.target_reward is not None and reward >= config.target_reward:
                ray.get(quantizer.stop.remote())
        if config.max_seconds is not None and time.perf_counter() - start >= config.max_seconds:
            ray.get(quantizer.stop.remote())


def job_for(config: ActorQConfig) -> Job:
    """The store's identity of a run: method ``actorq``, the actors' precision, the seed and the setting's key (no
    agent: ``agent_hash`` stays empty)."""
    spec = QuantSpec(config.actor_precision)
    return Job(
        config.algo,
        config.env_id,
        spec,
        "",
        config.eval_episodes,
        config.seed,
        1,
        setting=config.run_key(),
        method="actorq",
    )


def already_stored(config: ActorQConfig, store: ResultStore) -> bool:
    """True when this exact run finished before (a crashed run's partial row does not count)."""
    row = store.get(job_for(config).key)
    return row is not None and not row["provenance"].get("error")


def actor_steps(outcome: RunOutcome) -> int:
    """Environment steps the learner received, over actors' restarts (a crashed run: what the actors reported)."""
    delivered = outcome.learner.get("per_actor")
    return int(sum(delivered.values()) if delivered else sum(actor["steps"] for actor in outcome.actors))


def degenerate(outcome: RunOutcome) -> str | None:
    """Why a finished run measures no speed-up (no actor steps, or a learner that never trained), else None."""
    steps, updates = actor_steps(outcome), int(outcome.learner.get("updates", 0))
    if steps and updates:
        return None
    return f"{steps} actor steps and {updates} learner updates in {outcome.wall_seconds:.0f} s"


def actorq_result(config: ActorQConfig, outcome: RunOutcome) -> EvalResult:
    """One ``actorq`` row: final reward of the learner's policy; curve, breakdown, bytes and speed in provenance."""
    steps = actor_steps(outcome)
    final = outcome.final_rewards or outcome.curve[-1]["episodes"]  # a crashed run: its last evaluation's episodes
    return EvalResult(
        job=job_for(config),
        episode_rewards=tuple(final),
        episode_lengths=tuple(0 for _ in final),  # learner evaluation; lengths not kept
        wall_seconds=outcome.wall_seconds,
        provenance=driver_provenance()
        | {
            "agent_source": "actorq",
            "config": asdict(config),
            "curve": outcome.curve,
            "actors": outcome.actors,
            "learner": outcome.learner,
            "broadcast_bytes": outcome.broadcast_bytes,
            "broadcasts": outcome.broadcasts,
            "restarts": outcome.restarts,
            "energy": outcome.energy,
            "error": outcome.error,
            "actor_steps": steps,
            "actor_steps_per_s": steps / max(outcome.wall_seconds, 1e-9),
            "mismatch": outcome.mismatch,
            "learner_device": outcome.learner_device,
            "setting": config.run_key(),
            "load": outcome.load or load_record(),
        },
    )
