"""The three Ray actor kinds of ActorQ: an fp32 SB3 learner (DQN, TD3 or DDPG), a parameter quantizer, and
quantized actors."""

from __future__ import annotations

import copy
import os
import queue
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
import yaml
from stable_baselines3 import DDPG, DQN, TD3
from stable_baselines3.common.logger import configure
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.utils import polyak_update
from stable_baselines3.common.vec_env import DummyVecEnv

from quarl_bench.actorq.comm import pack_state, state_nbytes, unpack_state
from quarl_bench.actorq.exploration import explore
from quarl_bench.actorq.policy import (
    build_policy,
    holds_int8_weights,
    load_payload,
    network_for,
    network_output,
    policy_payload,
)
from quarl_bench.evaluate import evaluate

LEARNERS = {"dqn": DQN, "td3": TD3, "ddpg": DDPG}
# The rl-zoo3 hyperparameters a distributed learner keeps (train_freq, gradient_steps, noise: the actors' business).
KEPT = {"learning_rate": float, "gamma": float, "tau": float, "buffer_size": int, "learning_starts": int,
        "target_update_interval": int, "policy_delay": int, "target_policy_noise": float, "target_noise_clip": float,
        "train_freq": int, "gradient_steps": int}  # fmt: skip


def zoo_hyperparams(algo: str, env_id: str) -> dict[str, Any]:
    """rl-zoo3's hyperparameters for algo/env that a learner fed by actors uses, or {} (SB3's defaults)."""
    import rl_zoo3

    with open(Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml") as handle:
        table = yaml.safe_load(handle)
    params = {}
    for key, value in table.get(env_id, {}).items():
        if key in KEPT:
            if isinstance(value, str) and value.startswith("lin_"):
                value = value[4:]  # a linear schedule's start value: actors have no notion of progress
            if isinstance(value, list):
                continue  # train_freq as [n, "episode"]: keep SB3's default ratio
            params[key] = KEPT[key](float(value))
    return params


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
    """The network the actors run: DQN's Q-network MLP or TD3/DDPG's deterministic actor MLP."""
    return model.q_net.q_net if isinstance(model, DQN) else model.actor.mu


@ray.remote
class Learner:
    """An SB3 off-policy algorithm doing only its ``train()``, in a thread of its own, on a replay buffer that the
    actors fill through ``add``. ``add`` only queues: actors never wait for gradient steps. The training thread
    moves queued transitions into the buffer and trains while updates x batch < inserted x samples_per_insert."""

    def __init__(self, algo: str, env_id: str, arch: list[int], batch_size: int, samples_per_insert: float, seed: int,
                 learning_starts: int | None = None) -> None:  # fmt: skip
        torch.set_num_threads(1)
        params = zoo_hyperparams(algo, env_id)
        zoo_starts = params.pop("learning_starts", 1_000)
        self.learning_starts = zoo_starts if learning_starts is None else learning_starts
        self.target_every = target_sync_every(params)
        if algo != "dqn":
            self.target_every = None  # TD3/DDPG update their targets by polyak averaging inside train()
        self.model = LEARNERS[algo]("MlpPolicy", env_id, policy_kwargs={"net_arch": arch}, batch_size=batch_size,
                                    learning_starts=0, seed=seed, device="cpu", **params)  # fmt: skip
        self.model.set_logger(configure(None, []))
        self.model._current_progress_remaining = 1.0
        self.eval_policy = copy.deepcopy(self.model.policy)
        self.batch_size, self.samples_per_insert = batch_size, samples_per_insert
        self.received = self.inserted = self.updates = 0
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

    def add(self, transitions: tuple[np.ndarray, ...]) -> int:
        """Queue actor transitions for the replay buffer; returns how many were received so far."""
        self._raise_if_failed()
        self.incoming.put(transitions)
        self.received += len(transitions[0])
        return self.received

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
                    if self.target_every and self.updates % self.target_every == 0:
                        polyak_update(self.model.q_net.parameters(), self.model.q_net_target.parameters(), 1.0)
                self.train_seconds += time.perf_counter() - start
        except Exception as error:  # noqa: BLE001 - reported to the driver by the next call
            self.failure = f"{type(error).__name__}: {error}"

    def _drain(self) -> None:
        """Move queued transitions into the replay buffer (only this thread touches the buffer)."""
        while True:
            try:
                obs, next_obs, actions, rewards, dones = self.incoming.get_nowait()
            except queue.Empty:
                return
            for i in range(len(obs)):
                self.model.replay_buffer.add(obs[i : i + 1], next_obs[i : i + 1], actions[i : i + 1],
                                             rewards[i : i + 1], dones[i : i + 1], [{}])  # fmt: skip
            self.inserted += len(obs)

    def _raise_if_failed(self) -> None:
        if self.failure:
            raise RuntimeError(f"learner training failed: {self.failure}")

    def weights(self) -> dict[str, torch.Tensor]:
        self._raise_if_failed()
        with self.lock:
            return {k: v.detach().clone() for k, v in acting_module(self.model).state_dict().items()}

    def evaluate(self, episodes: int) -> tuple[list[float], int, int]:
        """Episode rewards of the fp32 deterministic policy on its own envs; with the actor steps and updates so far."""
        self._raise_if_failed()
        with self.lock:
            self.eval_policy.load_state_dict(self.model.policy.state_dict())
        env = DummyVecEnv([lambda: Monitor(gym.make(self.env_id)) for _ in range(min(episodes, 10))])
        env.seed(self.seed + 10_000)
        result = evaluate(self.eval_policy, env, episodes, self.seed)
        env.close()
        return result.rewards, self.inserted, self.updates

    def stop(self) -> None:
        """End the training thread and put whatever is still queued into the buffer."""
        self.stopping.set()
        self.thread.join()
        self._drain()
        self._raise_if_failed()

    def counters(self) -> dict[str, float]:
        return {
            "inserted": self.inserted,
            "updates": self.updates,
            "train_seconds": self.train_seconds,
            "samples_per_insert": self.updates * self.batch_size / max(self.inserted, 1),
        }


@ray.remote
class ParameterQuantizer:
    """Turns the learner's newest fp32 weights into what actors load, and serves it to their pulls.

    ``comm_bits`` 32: the actors' policy itself, built here at the actors' precision (an int8 policy holds one byte
    per weight) once per new version however many actors pull it, and serialized (ONNX or a pickled module). ``comm_bits`` below 32 (the paper's
    q_c ablation): the weights bit-packed at ``comm_bits``; each actor builds its policy from them.
    """

    def __init__(self, comm_bits: int, precision: str, int8_backend: str, action_space: Any, obs_dim: int,
                 arch: list[int]) -> None:  # fmt: skip
        torch.set_num_threads(1)
        self.comm_bits, self.precision, self.int8_backend = comm_bits, precision, int8_backend
        self.net = network_for(action_space, obs_dim, arch) if comm_bits == 32 else None
        self.weights: dict[str, torch.Tensor] | None = None
        self.version = self.built_version = 0
        self.payload: tuple[str, Any] | None = None  # ("onnx" | "torch", bytes) or ("packed", packed weights)
        self.stopped = False
        self.registrations: dict[int, int] = defaultdict(int)
        self.actor_pids: dict[int, int] = {}

    def publish(self, weights: dict[str, torch.Tensor]) -> int:
        """Take the learner's newest weights (built lazily, at the next pull)."""
        self.weights = weights
        self.version += 1
        return self.version

    def _build(self) -> float:
        """Build the broadcast for the newest version if not done yet; returns the seconds it took."""
        if self.built_version == self.version:
            return 0.0
        start = time.perf_counter()
        if self.net is not None:
            self.payload = policy_payload(self.weights, self.net, self.precision, self.int8_backend)
        else:
            self.payload = "packed", pack_state(self.weights, self.comm_bits)
        self.built_version = self.version
        return time.perf_counter() - start

    def latest(self) -> tuple[int, tuple[str, Any] | None, bool, float]:
        """(version, broadcast, stopped, seconds this pull waited for the quantizer to build the broadcast)."""
        seconds = self._build()
        return self.version, self.payload, self.stopped, seconds

    def broadcast_nbytes(self) -> int:
        self._build()
        kind, data = self.payload
        return state_nbytes(data) if kind == "packed" else len(data)

    def stop(self) -> None:
        self.stopped = True

    def register(self, index: int, pid: int) -> int:
        """Called by each actor (re)start: counts incarnations, so restarts are known."""
        self.registrations[index] += 1
        self.actor_pids[index] = pid
        return self.registrations[index]

    def pids(self) -> dict[int, int]:
        return dict(self.actor_pids)

    def restarts(self) -> int:
        return sum(count - 1 for count in self.registrations.values())


@ray.remote(max_restarts=-1, max_task_retries=-1)
class Actor:
    """One env, a quantized copy of the policy, its own exploration level; pulls weights every ``pull_period``
    steps and pushes transitions to the learner every ``push_every`` steps (one push in flight)."""

    def __init__(self, index: int, env_id: str, arch: list[int], precision: str, int8_backend: str,
                 exploration: float, pull_period: int, quantizer: Any, learner: Any, seed: int,
                 push_every: int = 250) -> None:  # fmt: skip
        torch.set_num_threads(1)
        self.index, self.precision, self.exploration, self.pull_period = index, precision, exploration, pull_period
        self.int8_backend = int8_backend
        self.quantizer, self.learner, self.push_every = quantizer, learner, push_every
        self.env = gym.make(env_id)
        self.rng = np.random.default_rng(seed + index)
        self.obs, _ = self.env.reset(seed=seed + index)
        self.net = network_for(self.env.action_space, self.env.observation_space.shape[0], arch)
        self.policy = None
        self.seconds: dict[str, float] = defaultdict(float)
        self.pulls = self.steps = 0
        self.bytes_pulled = 0
        self.incarnation = ray.get(quantizer.register.remote(index, os.getpid()))

    def _pull(self) -> bool:
        start = time.perf_counter()
        _, payload, stopped, quantize_seconds = ray.get(self.quantizer.latest.remote())
        pulled = time.perf_counter()
        kind, data = payload
        if kind == "packed":  # comm-quantized weights: build the policy here
            state = unpack_state(data)
            unpacked = time.perf_counter()
            self.policy = build_policy(state, self.net, self.precision, self.int8_backend)
            loaded = time.perf_counter()
            self.bytes_pulled += state_nbytes(data)
        else:  # the policy, built by the quantizer
            self.policy = load_payload(kind, data)
            unpacked = loaded = time.perf_counter()
            self.bytes_pulled += len(data)
        self.seconds["quantize"] += quantize_seconds
        self.seconds["pull"] += pulled - start - quantize_seconds
        self.seconds["deserialize"] += unpacked - pulled
        self.seconds["load_state_dict"] += loaded - unpacked
        self.pulls += 1
        return stopped

    def run(self, max_steps: int) -> dict[str, Any]:
        """Collect until ``max_steps`` or the driver stops the run; returns this actor's breakdown."""
        buffer: list[tuple] = []
        pending = None
        while self.steps < max_steps:
            if self.steps % self.pull_period == 0 and self._pull():
                break
            start = time.perf_counter()
            output = network_output(self.policy, self.obs, self.precision)
            action, stored_action = explore(output, self.env.action_space, self.exploration, self.rng)
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            self.seconds["step"] += time.perf_counter() - start
            buffer.append((self.obs, next_obs, stored_action, reward, terminated))
            self.obs = next_obs if not (terminated or truncated) else self.env.reset()[0]
            self.steps += 1
            if len(buffer) >= self.push_every:
                start = time.perf_counter()
                if pending is not None:
                    ray.get(pending)  # one push in flight at a time
                pending = self.learner.add.remote(tuple(np.array(column) for column in zip(*buffer, strict=True)))
                buffer = []
                self.seconds["push"] += time.perf_counter() - start
        if pending is not None:
            ray.get(pending)
        return self.report()

    def report(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "steps": self.steps,
            "pulls": self.pulls,
            "bytes_pulled": self.bytes_pulled,
            "seconds": dict(self.seconds),
            "int8_weights": self.policy is not None and holds_int8_weights(self.policy),
            "incarnation": self.incarnation,
        }
