"""ActorQ's learner: an fp32 SB3 off-policy algorithm (DQN, TD3, DDPG or D4PG) training on what actors send."""

from __future__ import annotations

import copy
import os
import queue
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
from stable_baselines3.common.logger import configure
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.utils import polyak_update
from stable_baselines3.common.vec_env import DummyVecEnv

from quarl_bench.evaluation.evaluate import evaluate
from quarl_bench.zoo.algorithms import algorithm
from quarl_bench.zoo.envs import register_env

# The rl-zoo3 hyperparameters a distributed learner keeps (train_freq, gradient_steps, noise: the actors' business).
KEPT = {
    "learning_rate": float,
    "gamma": float,
    "tau": float,
    "buffer_size": int,
    "learning_starts": int,
    "target_update_interval": int,
    "policy_delay": int,
    "target_policy_noise": float,
    "target_noise_clip": float,
    "train_freq": int,
    "gradient_steps": int,
    "n_steps": int,
}
# D4PG's distribution and critic (zoo_configs/hyperparams/d4pg.yml), passed as policy kwargs.
DISTRIBUTION = {"n_atoms": int, "v_min": float, "v_max": float}


def zoo_hyperparams(algo: str, env_id: str) -> dict[str, Any]:
    """The hyperparameters for algo/env that a learner fed by actors uses, from
    :func:`quarl_bench.config.zoo_hyperparameters`."""
    from quarl_bench.config import zoo_hyperparameters

    entry = zoo_hyperparameters(algo, env_id)
    params = {}
    for key, value in entry.items():
        if key in KEPT:
            if isinstance(value, str) and value.startswith("lin_"):
                value = value[4:]  # a linear schedule's start value: actors have no notion of progress
            if isinstance(value, list):
                continue  # train_freq as [n, "episode"]: keep SB3's default ratio
            params[key] = KEPT[key](float(value))
        elif key in DISTRIBUTION:
            params[key] = DISTRIBUTION[key](value)
        elif key == "critic_arch":
            params[key] = [int(width) for width in value]
    return params


def policy_kwargs(algo: str, arch: list[int], params: dict[str, Any]) -> dict[str, Any]:
    """The learner's network settings: ``arch`` for the acting network (D4PG: its actor; its critic from
    ``critic_arch``, the paper's 3x512 by default) and D4PG's return distribution. Pops them from ``params``."""
    if algo != "d4pg":
        return {"net_arch": arch}
    critic = params.pop("critic_arch", [512, 512, 512])
    return {"net_arch": {"pi": arch, "qf": critic}} | {k: params.pop(k) for k in DISTRIBUTION if k in params}


def target_sync_every(params: dict[str, Any]) -> int:
    """DQN's hard target update period in gradient updates, from rl-zoo3's settings in env steps.

    SB3 trains in bursts of ``gradient_steps`` every ``train_freq`` env steps and syncs the target every
    ``target_update_interval`` env steps, so a sync comes at most once per burst. ActorQ's actors run at any speed,
    so the learner keeps that number of updates per sync instead of counting env steps.
    """
    interval = params.pop("target_update_interval", 10_000)
    train_freq = params.pop("train_freq", 4)
    gradient_steps = params.pop("gradient_steps", 1)
    burst = train_freq if gradient_steps == -1 else gradient_steps
    return max(burst, round(interval * burst / train_freq))


def acting_module(model: Any) -> torch.nn.Module:
    """The network the actors run: DQN's Q-network MLP or TD3/DDPG/D4PG's deterministic actor MLP."""
    return model.q_net.q_net if hasattr(model, "q_net") else model.actor.mu


# A threaded Ray actor: ``add`` (the actors' pushes), ``weights`` and ``evaluate`` run concurrently, so a
# seconds-long evaluation never holds up ingestion (with one call at a time, actors blocked in ``push`` meanwhile).
# actors push and the driver asks for counters while it trains and evaluates (threads; mypy's view of ray.remote
# lists no actor options, so they pass as a mapping)
LEARNER_OPTIONS: dict[str, Any] = {"max_concurrency": 8}


@ray.remote(**LEARNER_OPTIONS)
class Learner:
    """An SB3 off-policy algorithm doing only its ``train()``, in a thread of its own, on a replay buffer that the
    actors fill through ``add``. ``add`` only queues: actors never wait for gradient steps. The training thread
    moves queued transitions into the buffer and trains while updates x batch < inserted x samples_per_insert."""

    def __init__(
        self,
        algo: str,
        env_id: str,
        arch: list[int],
        batch_size: int,
        samples_per_insert: float,
        seed: int,
        learning_starts: int | None = None,
        device: str = "cpu",
    ) -> None:
        torch.set_num_threads(1)
        register_env(env_id)
        params = zoo_hyperparams(algo, env_id)
        zoo_starts = params.pop("learning_starts", 1_000)
        self.learning_starts = zoo_starts if learning_starts is None else learning_starts
        self.target_every: int | None = target_sync_every(params)
        if algo != "dqn":
            self.target_every = None  # TD3/DDPG/D4PG update their targets by polyak averaging (tau) inside train()
        network = policy_kwargs(algo, arch, params)
        self.model = algorithm(algo).actorq_class()(
            "MlpPolicy",
            env_id,
            policy_kwargs=network,
            batch_size=batch_size,
            learning_starts=0,
            seed=seed,
            device=device,
            **params,
        )
        self.device = device
        self.model.set_logger(configure(None, []))
        self.model._current_progress_remaining = 1.0
        self.eval_policy = copy.deepcopy(self.model.policy)
        self.batch_size, self.samples_per_insert = batch_size, samples_per_insert
        self.inserted = self.updates = 0
        self.per_actor: dict[int, int] = {}  # transitions received from each actor index, across its restarts
        self.counting = threading.Lock()  # add() runs in several threads at once
        self.evaluations_running = 0
        self.train_seconds = 0.0
        self.env_id, self.seed = env_id, seed
        self.incoming: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()  # guards the model between a gradient step and a weights snapshot
        self.stopping = threading.Event()
        self.failure: str | None = None
        self.thread = threading.Thread(target=self._train_loop, name="learner", daemon=True)
        self.thread.start()

    def pid(self) -> int:
        return os.getpid()

    def add(self, transitions: tuple[np.ndarray, ...], actor: int = 0) -> int:
        """Queue actor ``actor``'s transitions for the replay buffer; returns how many it has delivered so far."""
        self._raise_if_failed()
        self.incoming.put(transitions)
        with self.counting:
            self.per_actor[actor] = self.per_actor.get(actor, 0) + len(transitions[0])
            return self.per_actor[actor]

    def delivered(self, actor: int) -> int:
        """Transitions actor ``actor`` delivered, over all its incarnations: where a restarted actor goes on from."""
        with self.counting:
            return self.per_actor.get(actor, 0)

    def _train_loop(self) -> None:
        try:
            while not self.stopping.is_set():
                self._drain()
                due = int(self.inserted * self.samples_per_insert / self.batch_size) - self.updates
                if self.inserted < self.learning_starts or due <= 0:
                    time.sleep(0.002)
                    continue
                start = time.perf_counter()
                with self.lock:
                    self.model.train(gradient_steps=1, batch_size=self.batch_size)
                    self.updates += 1
                    if self.target_every and self.updates % self.target_every == 0:  # DQN's own tau (1: a copy)
                        polyak_update(
                            self.model.q_net.parameters(), self.model.q_net_target.parameters(), self.model.tau
                        )
                self.train_seconds += time.perf_counter() - start
        except Exception as error:  # noqa: BLE001 - reported to the driver by the next call
            self.failure = f"{type(error).__name__}: {error}"

    def _drain(self) -> None:
        """Move queued transitions into the replay buffer (only this thread touches the buffer)."""
        while True:
            try:
                obs, next_obs, actions, rewards, terminated, boundary = self.incoming.get_nowait()
            except queue.Empty:
                return
            # A trajectory breaks where an episode was truncated and where an actor's chunk ends (the next entry is
            # another actor's): stored as a timeout, so n-step returns stop there and bootstrap from next_obs.
            dones = terminated | boundary
            for i in range(len(obs)):
                truncated = bool(boundary[i] and not terminated[i])
                self.model.replay_buffer.add(
                    obs[i : i + 1],
                    next_obs[i : i + 1],
                    actions[i : i + 1],
                    rewards[i : i + 1],
                    dones[i : i + 1],
                    [{"TimeLimit.truncated": truncated}],
                )
            self.inserted += len(obs)

    def _raise_if_failed(self) -> None:
        if self.failure:
            raise RuntimeError(f"learner training failed: {self.failure}")

    def weights(self) -> dict[str, torch.Tensor]:
        self._raise_if_failed()
        with self.lock:
            return {k: v.detach().cpu().clone() for k, v in acting_module(self.model).state_dict().items()}

    def evaluate(self, episodes: int) -> tuple[list[float], int, int]:
        """Episode rewards of the fp32 deterministic policy on its own envs; with the actor steps and updates so far."""
        self._raise_if_failed()
        with self.counting:
            self.evaluations_running += 1
        try:
            with self.lock:
                self.eval_policy.load_state_dict(self.model.policy.state_dict())
            env = DummyVecEnv([lambda: Monitor(gym.make(self.env_id)) for _ in range(min(episodes, 10))])
            env.seed(self.seed + 10_000)
            result = evaluate(self.eval_policy, env, episodes, self.seed)
            env.close()
        finally:
            with self.counting:
                self.evaluations_running -= 1
        return result.rewards, self.inserted, self.updates

    def evaluating(self) -> int:
        """How many evaluations are running now."""
        with self.counting:
            return self.evaluations_running

    def stop(self) -> None:
        """End the training thread and put whatever is still queued into the buffer."""
        self.stopping.set()
        self.thread.join()
        self._drain()
        self._raise_if_failed()

    def counters(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "per_actor": {str(k): v for k, v in self.per_actor.items()},
            "inserted": self.inserted,
            "updates": self.updates,
            "train_seconds": self.train_seconds,
            "samples_per_insert": self.updates * self.batch_size / max(self.inserted, 1),
        }
