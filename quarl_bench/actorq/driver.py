"""One ActorQ run: start the learner, quantizer and actors on Ray, evaluate on a clock, store the outcome.

A run stopped from outside (SIGTERM, or SIGINT: Ctrl-C) keeps what it measured: the curve so far is returned with
``interrupted`` set, stored marked so, and no speed-up is derived from it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from quarl_bench.actorq.carbon import track_energy
from quarl_bench.actorq.config import ActorQConfig
from quarl_bench.actorq.exploration import exploration_levels
from quarl_bench.deploy.machine import device_record, load_before_run, load_record
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
    interrupted: str | None = None  # the signal that stopped the run from outside (its curve is kept, not compared)


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
    from quarl_bench.zoo.devices import training_device

    config.env_spaces()  # a bad algo/env pair: one line before anything starts
    device = training_device(config.learner_device, "learner device")
    # the load before Ray starts: during the run its own learner and actors keep the cores busy
    outcome = RunOutcome(learner_device=device, load=load_before_run())
    with terminate_as_interrupt():
        try:
            return _run(config, outcome, address, log_path, on_eval)
        except KeyboardInterrupt as stop:  # before the cluster was up, or while it went down
            outcome.interrupted = outcome.interrupted or _signal_name(stop)
            outcome.error = outcome.error or f"interrupted by {outcome.interrupted}"
            return outcome


_RECEIVED: list[str] = []  # the signals that interrupted runs of this process (Ray re-raises a bare interrupt)
_SHARED = threading.Event()  # set while runs share one cluster (shared_cluster): a run neither starts nor stops it
STOP = threading.Event()  # set to stop every run of this process (the main thread's signal, runs in other threads)


@contextlib.contextmanager
def shared_cluster(address: str | None, log_path: Path | None) -> Iterator[None]:
    """One Ray cluster for the runs started inside (side by side, in threads): started once, stopped at the end."""
    import ray

    previous = signal.getsignal(signal.SIGTERM)
    _RECEIVED.clear()
    connect(address, log_path)
    _own_sigterm()
    _SHARED.set()
    STOP.clear()
    try:
        yield
    finally:
        _SHARED.clear()
        ray.shutdown()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(_signal: int, _frame: Any) -> None:
    _RECEIVED.append("SIGTERM")
    raise KeyboardInterrupt("SIGTERM")


def _signal_name(stop: KeyboardInterrupt) -> str:
    """Which signal ``stop`` came from: SIGTERM when this process's handler saw one, else SIGINT (Ctrl-C)."""
    return str(stop) or (_RECEIVED[-1] if _RECEIVED else "SIGINT")


def _own_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt again, after ``ray.init`` put its own handler in (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt("SIGTERM") while a run lasts (in the main thread; elsewhere signals cannot
    be caught), as Ctrl-C does: the run then keeps what it measured."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    _RECEIVED.clear()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(config: ActorQConfig, outcome: RunOutcome, address: str | None, log_path: Path | None, on_eval) -> RunOutcome:
    import ray

    from quarl_bench.actorq.actor import Actor
    from quarl_bench.actorq.learner import Learner
    from quarl_bench.actorq.param_quantizer import ParameterQuantizer

    # Ray actor classes (@ray.remote): mypy applies no class decorator, so what it would see lacks .remote
    remote_learner: Any = Learner
    remote_quantizer: Any = ParameterQuantizer
    remote_actor: Any = Actor
    device = outcome.learner_device
    observation_space, action_space = config.env_spaces()
    shared = _SHARED.is_set()
    if not shared:
        connect(address, log_path)
        _own_sigterm()  # ray.init installs its own SIGTERM handler (it exits 1, losing the run)
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
            except KeyboardInterrupt as stop:  # stopped from outside: the curve so far is the run's answer
                outcome.interrupted = _signal_name(stop)
            outcome.wall_seconds = time.perf_counter() - start
        outcome.energy = asdict(energy)
        if outcome.interrupted:
            outcome.error = f"interrupted by {outcome.interrupted} after {outcome.wall_seconds:.0f} s"
            with contextlib.suppress(Exception):  # the counters so far, if the learner still answers at once
                outcome.learner = ray.get(learner.counters.remote(), timeout=5)
            return outcome
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
        try:
            if not shared:
                ray.shutdown()
        except KeyboardInterrupt as stop:  # a second signal while Ray went down: what was measured stays
            outcome.interrupted = outcome.interrupted or _signal_name(stop)
            outcome.error = outcome.error or f"interrupted by {outcome.interrupted} while Ray stopped"


def describe(error: Exception) -> str:
    """One line for a Ray failure: its kind and the first line of its message."""
    cause = getattr(error, "cause", None) or error  # a RayTaskError wraps the exception raised in the actor
    text = str(cause).strip()
    return f"{type(cause).__name__}: {text.splitlines()[0] if text else 'no message'}"[:300]


def drive(config: ActorQConfig, cluster: Cluster, outcome: RunOutcome, start: float, on_eval) -> None:
    """Start the actors, re-broadcast the learner's weights twice a second, evaluate on the run's clock
    (``eval_clock``: every ``eval_every_s`` seconds, or every ``eval_every_count`` actor steps or updates)."""
    import ray

    learner, quantizer, actors = cluster.learner, cluster.quantizer, cluster.actors
    runs = {actor.run.remote(config.max_actor_steps): actor for actor in actors}
    every = config.eval_every_s if config.eval_clock == "seconds" else config.eval_every_count
    due = 0.0  # the clock's reading the next evaluation is due at
    while runs:
        if STOP.is_set():  # the main thread was signalled while this run went on in another
            raise KeyboardInterrupt(_RECEIVED[-1] if _RECEIVED else "SIGINT")
        done, _ = ray.wait(list(runs), num_returns=len(runs), timeout=0.5)
        for ref in done:
            outcome.actors.append(ray.get(ref))
            runs.pop(ref)
        ray.get(quantizer.publish.remote(learner.weights.remote()))
        outcome.broadcasts += 1
        if clock_reading(config, learner, start) >= due or not runs:
            point = evaluation(config, learner, start)
            outcome.curve.append(point)
            if on_eval:
                on_eval(point, cluster)
            due = point[config.eval_clock] + every
            if config.target_reward is not None and point["reward"] >= config.target_reward:
                ray.get(quantizer.stop.remote())
        if config.max_seconds is not None and time.perf_counter() - start >= config.max_seconds:
            ray.get(quantizer.stop.remote())


def clock_reading(config: ActorQConfig, learner: Any, start: float) -> float:
    """The run's evaluation clock now: seconds since the start, or the learner's actor steps or updates so far."""
    import ray

    if config.eval_clock == "seconds":
        return time.perf_counter() - start
    counters = ray.get(learner.counters.remote())
    return float(counters["inserted"] if config.eval_clock == "actor_steps" else counters["updates"])


def evaluation(config: ActorQConfig, learner: Any, start: float) -> dict[str, Any]:
    """One evaluation of the learner's policy; with ``near_target_episodes``, one whose mean lies within 10% of the
    target is played again with that many more episodes (the first ones replay: the evaluation's seeds are fixed),
    and that larger evaluation is the point."""
    import ray

    rewards, steps, updates = ray.get(learner.evaluate.remote(config.eval_episodes))
    target = config.target_reward
    near = target is not None and abs(float(np.mean(rewards)) - target) <= 0.1 * max(abs(target), 1.0)
    if config.near_target_episodes and near:
        total = config.eval_episodes + config.near_target_episodes
        rewards, steps, updates = ray.get(learner.evaluate.remote(total))
    return {
        "seconds": time.perf_counter() - start,
        "actor_steps": steps,
        "updates": updates,
        "reward": float(np.mean(rewards)),
        "episodes": [float(r) for r in rewards],
    }


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
            "device_record": device_record(outcome.learner_device),  # the GPU's name and tensor cores on cuda
            "interrupted": outcome.interrupted,
            "setting": config.run_key(),
            "load": outcome.load or load_record(),
        },
    )
