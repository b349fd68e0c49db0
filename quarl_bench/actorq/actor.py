"""ActorQ's actors: quantized (int8/fp16) policies collecting experience for the learner."""

from __future__ import annotations

import os
import time
from collections import defaultdict, deque
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch

from quarl_bench.actorq.comm import state_nbytes, unpack_state
from quarl_bench.actorq.exploration import explore
from quarl_bench.actorq.policy import (
    build_policy,
    holds_int8_weights,
    load_payload,
    network_for,
    network_output,
    network_outputs,
)
from quarl_bench.zoo.envs import register_env

MISMATCH_BATCH = 256


def chunk(buffer: list[tuple]) -> tuple[np.ndarray, ...]:
    """Transitions as columns (obs, next_obs, action, reward, terminated, boundary); ``boundary`` marks where the
    trajectory breaks: a truncated episode, and the chunk's last step (the learner's next entry is not its successor)."""
    obs, next_obs, actions, rewards, terminated, truncated = (np.array(column) for column in zip(*buffer, strict=True))
    boundary = truncated.astype(bool)
    boundary[-1] = True
    return obs, next_obs, actions, rewards, terminated.astype(bool), boundary


@ray.remote(max_restarts=-1, max_task_retries=-1)
class Actor:
    """One env, a quantized copy of the policy, its own exploration level; pulls weights every ``pull_period``
    steps and pushes transitions to the learner every ``push_every`` steps (one push in flight)."""

    def __init__(
        self,
        index: int,
        env_id: str,
        arch: list[int],
        precision: str,
        int8_backend: str,
        exploration: float,
        pull_period: int,
        quantizer: Any,
        learner: Any,
        seed: int,
        push_every: int = 250,
    ) -> None:
        torch.set_num_threads(1)
        self.index, self.precision, self.exploration, self.pull_period = index, precision, exploration, pull_period
        self.int8_backend = int8_backend
        self.quantizer, self.learner, self.push_every = quantizer, learner, push_every
        register_env(env_id)
        self.env = gym.make(env_id)
        self.rng = np.random.default_rng(seed + index)
        self.obs, _ = self.env.reset(seed=seed + index)
        self.net = network_for(self.env.action_space, int(np.prod(self.env.observation_space.shape or ())), arch)
        self.policy: Any = None  # the pulled policy (torch module or ORT session), built at the first pull
        self.seconds: dict[str, float] = defaultdict(float)
        self.pulls = self.steps = 0
        self.bytes_pulled = 0
        self.recent: deque = deque(maxlen=MISMATCH_BATCH)  # the observations policy mismatch is measured on
        self.incarnation = ray.get(quantizer.register.remote(index, os.getpid()))

    def _pull(self) -> bool:
        start = time.perf_counter()
        version, payload, stopped, quantize_seconds = ray.get(self.quantizer.latest.remote())
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
        self._report_mismatch(version)
        return stopped

    def _report_mismatch(self, version: int) -> None:
        """Send the new policy's outputs on recent observations to the quantizer, which compares them with the
        learner's fp32 policy of the same version (fire and forget: the actor does not wait)."""
        if not self.recent:
            return
        observations = np.array(self.recent, dtype=np.float32)
        outputs = network_outputs(self.policy, observations, self.precision)
        self.quantizer.record_mismatch.remote(version, self.index, observations, outputs)

    def _push(self, buffer: list[tuple], pending: Any) -> Any:
        start = time.perf_counter()
        if pending is not None:
            ray.get(pending)  # one push in flight at a time
        pending = self.learner.add.remote(chunk(buffer), self.index)
        self.seconds["push"] += time.perf_counter() - start
        return pending

    def run(self, max_steps: int) -> dict[str, Any]:
        """Collect until this actor has delivered ``max_steps`` transitions over all its incarnations (a restarted
        actor goes on from what the learner received from it; what a killed one had not pushed is lost, never
        counted) or the driver stops the run; returns this actor's breakdown."""
        self.steps = ray.get(self.learner.delivered.remote(self.index))
        buffer: list[tuple] = []
        pending = None
        while self.steps < max_steps:
            if (self.policy is None or self.steps % self.pull_period == 0) and self._pull():
                break
            start = time.perf_counter()
            output = network_output(self.policy, self.obs, self.precision)
            action, stored_action = explore(output, self.env.action_space, self.exploration, self.rng)
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            self.seconds["step"] += time.perf_counter() - start
            buffer.append((self.obs, next_obs, stored_action, reward, terminated, truncated))
            self.recent.append(self.obs)
            self.obs = next_obs if not (terminated or truncated) else self.env.reset()[0]
            self.steps += 1
            if len(buffer) >= self.push_every:
                pending, buffer = self._push(buffer, pending), []
        if buffer:
            pending = self._push(buffer, pending)
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
