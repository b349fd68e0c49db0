"""The three Ray actor kinds of ActorQ: an fp32 DQN learner (SB3), a parameter quantizer, quantized actors."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
import yaml
from stable_baselines3 import DQN
from stable_baselines3.common.logger import configure
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.utils import polyak_update
from stable_baselines3.common.vec_env import DummyVecEnv

from quarl_bench.actorq.comm import pack_state, state_nbytes, unpack_state
from quarl_bench.actorq.policy import actor_policy, greedy_actions, holds_int8_weights, q_network
from quarl_bench.evaluate import evaluate

HYPERPARAMS = ("learning_rate", "gamma", "target_update_interval", "learning_starts", "buffer_size")


def zoo_dqn_hyperparams(env_id: str) -> dict[str, Any]:
    """rl-zoo3's DQN hyperparameters for the env (the ones a distributed learner keeps), or SB3's defaults."""
    import rl_zoo3

    with open(Path(rl_zoo3.__file__).parent / "hyperparams" / "dqn.yml") as handle:
        table = yaml.safe_load(handle)
    return {k: float(v) if k in ("learning_rate", "gamma") else int(float(v))
            for k, v in table.get(env_id, {}).items() if k in HYPERPARAMS}  # fmt: skip


@ray.remote
class Learner:
    """SB3's DQN doing only its ``train()`` on a replay buffer that the actors fill."""

    def __init__(self, env_id: str, arch: list[int], batch_size: int, samples_per_insert: float, seed: int) -> None:
        torch.set_num_threads(1)
        params = zoo_dqn_hyperparams(env_id)
        self.target_interval = params.pop("target_update_interval", 10_000)
        self.learning_starts = params.pop("learning_starts", 1_000)
        self.model = DQN("MlpPolicy", env_id, policy_kwargs={"net_arch": arch}, batch_size=batch_size,
                         learning_starts=0, seed=seed, device="cpu", **params)  # fmt: skip
        self.model.set_logger(configure(None, []))
        self.model._current_progress_remaining = 1.0
        self.batch_size, self.samples_per_insert = batch_size, samples_per_insert
        self.inserted = self.updates = 0
        self.next_target_sync = self.target_interval
        self.train_seconds = 0.0
        self.env_id, self.seed = env_id, seed

    def add(self, transitions: tuple[np.ndarray, ...]) -> int:
        """Insert actor transitions, then train so that each transition is sampled ``samples_per_insert`` times."""
        obs, next_obs, actions, rewards, dones = transitions
        for i in range(len(obs)):
            self.model.replay_buffer.add(obs[i : i + 1], next_obs[i : i + 1], actions[i : i + 1], rewards[i : i + 1],
                                         dones[i : i + 1], [{}])  # fmt: skip
        self.inserted += len(obs)
        if self.inserted >= self.learning_starts:
            due = int(self.inserted * self.samples_per_insert / self.batch_size) - self.updates
            if due > 0:
                start = time.perf_counter()
                self.model.train(gradient_steps=due, batch_size=self.batch_size)
                self.train_seconds += time.perf_counter() - start
                self.updates += due
        while self.inserted >= self.next_target_sync:
            polyak_update(self.model.q_net.parameters(), self.model.q_net_target.parameters(), 1.0)
            self.next_target_sync += self.target_interval
        return self.inserted

    def weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.q_net.q_net.state_dict().items()}

    def evaluate(self, episodes: int) -> tuple[list[float], int, int]:
        """Episode rewards of the fp32 greedy policy on its own envs; with the actor steps and updates so far."""
        env = DummyVecEnv([lambda i=i: Monitor(gym.make(self.env_id)) for i in range(min(episodes, 10))])
        env.seed(self.seed + 10_000)
        result = evaluate(self.model.policy, env, episodes, self.seed)
        env.close()
        return result.rewards, self.inserted, self.updates

    def counters(self) -> dict[str, float]:
        return {"inserted": self.inserted, "updates": self.updates, "train_seconds": self.train_seconds}


@ray.remote
class ParameterQuantizer:
    """Holds the newest learner weights packed at ``comm_bits``; actors pull from here."""

    def __init__(self, comm_bits: int) -> None:
        self.comm_bits = comm_bits
        self.version = 0
        self.packed: dict[str, Any] | None = None
        self.stopped = False
        self.registrations: dict[int, int] = defaultdict(int)
        self.actor_pids: dict[int, int] = {}

    def publish(self, weights: dict[str, torch.Tensor]) -> int:
        self.packed = pack_state(weights, self.comm_bits)
        self.version += 1
        return state_nbytes(self.packed)

    def latest(self) -> tuple[int, dict[str, Any] | None, bool]:
        return self.version, self.packed, self.stopped

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
    """One env, a quantized copy of the policy, epsilon-greedy; pulls weights every ``pull_period`` steps."""

    def __init__(self, index: int, env_id: str, arch: list[int], precision: str, epsilon: float, pull_period: int,
                 quantizer: Any, learner: Any, seed: int, push_every: int = 250) -> None:  # fmt: skip
        torch.set_num_threads(1)
        self.index, self.precision, self.epsilon, self.pull_period = index, precision, epsilon, pull_period
        self.quantizer, self.learner, self.push_every = quantizer, learner, push_every
        self.env = gym.make(env_id)
        self.rng = np.random.default_rng(seed + index)
        self.obs, _ = self.env.reset(seed=seed + index)
        self.arch = arch
        self.policy = None
        self.seconds: dict[str, float] = defaultdict(float)
        self.pulls = self.steps = 0
        self.bytes_pulled = 0
        self.incarnation = ray.get(quantizer.register.remote(index, os.getpid()))

    def _pull(self) -> bool:
        start = time.perf_counter()
        _, packed, stopped = ray.get(self.quantizer.latest.remote())
        pulled = time.perf_counter()
        state = unpack_state(packed)
        unpacked = time.perf_counter()
        net = q_network(self.env.observation_space.shape[0], int(self.env.action_space.n), self.arch)
        net.load_state_dict(state)
        self.policy = actor_policy(net, self.precision)
        loaded = time.perf_counter()
        self.seconds["pull"] += pulled - start
        self.seconds["deserialize"] += unpacked - pulled
        self.seconds["load_state_dict"] += loaded - unpacked
        self.bytes_pulled += sum(p.nbytes for p in packed.values())
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
            if self.rng.random() < self.epsilon:
                action = int(self.env.action_space.sample())
            else:
                action = int(greedy_actions(self.policy, torch.as_tensor(self.obs)[None], self.precision)[0])
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            self.seconds["step"] += time.perf_counter() - start
            buffer.append((self.obs, next_obs, action, reward, terminated))
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
