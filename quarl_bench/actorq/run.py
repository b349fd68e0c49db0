"""One ActorQ run: start the learner, quantizer and actors on Ray, evaluate on a clock, store the outcome."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from quarl_bench.actorq.carbon import track_energy
from quarl_bench.actorq.policy import ACTOR_PRECISIONS
from quarl_bench.errors import QuarlError
from quarl_bench.runner import package_versions
from quarl_bench.store import ResultStore
from quarl_bench.types import EvalResult, Job, QuantSpec


@dataclass(frozen=True)
class ActorQConfig:
    """One distributed training run (fields as the ``quarl-bench actorq`` flags)."""

    env_id: str
    actor_precision: str = "int8"
    comm_bits: int = 32
    n_actors: int = 2
    policy_arch: tuple[int, ...] = (2048, 2048, 2048)
    pull_period: int = 1000
    samples_per_insert: float = 16.0
    batch_size: int = 256
    max_actor_steps: int = 50_000
    target_reward: float | None = None
    seed: int = 0
    eval_every_s: float = 10.0
    eval_episodes: int = 10
    algo: str = "dqn"

    def __post_init__(self) -> None:
        if self.actor_precision not in ACTOR_PRECISIONS:
            raise QuarlError(
                f"bad actor precision {self.actor_precision!r}: expected one of {', '.join(ACTOR_PRECISIONS)}"
            )
        if self.comm_bits not in (32, 16) and not 2 <= self.comm_bits <= 8:
            raise QuarlError(f"bad comm bits {self.comm_bits}: expected 32, 16 or 2-8")
        if self.algo != "dqn":
            raise QuarlError(f"bad ActorQ algo {self.algo!r}: expected dqn (the continuous learner is not built yet)")

    def run_key(self) -> str:
        """Identity of the run without the actors' precision: fp32 and int8 runs of one setting share it."""
        fields = asdict(self) | {"actor_precision": None}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def epsilons(n_actors: int, base: float = 0.4, alpha: float = 7.0) -> list[float]:
    """Ape-X's exploration spread over actors: eps_i = base ** (1 + alpha * i / (N - 1))."""
    if n_actors == 1:
        return [base]
    return [base ** (1 + alpha * i / (n_actors - 1)) for i in range(n_actors)]


@dataclass
class RunOutcome:
    curve: list[dict[str, float]] = field(default_factory=list)  # wall s, actor steps, updates, reward
    actors: list[dict[str, Any]] = field(default_factory=list)
    broadcast_bytes: int = 0
    broadcasts: int = 0
    restarts: int = 0
    wall_seconds: float = 0.0
    learner: dict[str, float] = field(default_factory=dict)
    final_rewards: list[float] = field(default_factory=list)
    energy: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # set when the learner (or the cluster) failed mid-run


def run_actorq(config: ActorQConfig, address: str | None = None, on_eval=None) -> RunOutcome:
    import ray

    from quarl_bench.actorq.system import Actor, Learner, ParameterQuantizer

    ray.init(address=address, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    outcome = RunOutcome()
    try:
        arch = list(config.policy_arch)
        learner = Learner.remote(config.env_id, arch, config.batch_size, config.samples_per_insert, config.seed)
        quantizer = ParameterQuantizer.remote(config.comm_bits)
        outcome.broadcast_bytes = ray.get(quantizer.publish.remote(learner.weights.remote()))
        actors = [
            Actor.remote(
                i, config.env_id, arch, config.actor_precision, eps, config.pull_period, quantizer, learner, config.seed
            )  # fmt: skip
            for i, eps in enumerate(epsilons(config.n_actors))
        ]
        with track_energy() as energy:
            start = time.perf_counter()
            try:
                drive(config, learner, quantizer, actors, outcome, start, on_eval)
            except ray.exceptions.RayActorError as error:  # the learner died; keep what was measured
                outcome.error = f"learner or quantizer process died: {type(error).__name__}"
            outcome.wall_seconds = time.perf_counter() - start
        outcome.energy = asdict(energy)
        if outcome.error:
            return outcome
        outcome.restarts = ray.get(quantizer.restarts.remote())
        outcome.learner = ray.get(learner.counters.remote())
        outcome.final_rewards = ray.get(learner.evaluate.remote(config.eval_episodes))[0]
        return outcome
    finally:
        ray.shutdown()


def drive(config: ActorQConfig, learner, quantizer, actors, outcome: RunOutcome, start: float, on_eval) -> None:
    """Start the actors, re-broadcast the learner's weights twice a second, evaluate every ``eval_every_s``."""
    import ray

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
            }
            outcome.curve.append(point)
            if on_eval:
                on_eval(point, quantizer)
            next_eval = time.perf_counter() + config.eval_every_s
            if config.target_reward is not None and reward >= config.target_reward:
                ray.get(quantizer.stop.remote())


def store_run(config: ActorQConfig, outcome: RunOutcome, store: ResultStore) -> dict[str, Any]:
    """One ``actorq`` row: final reward of the learner's policy; curve, breakdown, bytes and speed in provenance."""
    spec = QuantSpec(config.actor_precision, method="actorq")
    job = Job(config.algo, config.env_id, spec, config.run_key(), config.eval_episodes, config.seed, 1, True)
    steps = sum(actor["steps"] for actor in outcome.actors)
    final = outcome.final_rewards or [outcome.curve[-1]["reward"]]  # a crashed run: its last evaluation
    result = EvalResult(
        job=job,
        episode_rewards=tuple(final),
        episode_lengths=tuple(0 for _ in final),  # learner evaluation; lengths not kept
        wall_seconds=outcome.wall_seconds,
        provenance={
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
            "versions": package_versions(),
        },
    )
    store.put(result, replace=True)
    row = store.get(job.key)
    assert row is not None
    return row
