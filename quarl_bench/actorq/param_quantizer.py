"""ActorQ's parameter quantizer: the learner's fp32 weights -> what actors load (ActorQ's broadcast)."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np
import ray
import torch

from quarl_bench.actorq.comm import pack_state, state_nbytes
from quarl_bench.actorq.policy import (
    network_for,
    policy_payload,
)

HISTORY = 16  # fp32 versions kept: an actor reports on the version it pulled, maybe a few publishes ago


def policy_mismatch(outputs: np.ndarray, reference: np.ndarray, discrete: bool) -> dict[str, float]:
    """How far an actor's quantized policy is from the learner's fp32 one on the same observations.

    Discrete (Q-values): ``agreement``, the share of equal greedy actions, and ``q_error``, the mean absolute
    Q-value difference relative to the mean absolute fp32 Q-value. Continuous (actions in [-1, 1]):
    ``action_error``, the mean relative L2 distance, and ``agreement`` = 1 - mean |difference| / 2 (1: identical,
    0: opposite bounds). ``agreement`` always lies in [0, 1].
    """
    if discrete:
        agreement = float(np.mean(outputs.argmax(axis=1) == reference.argmax(axis=1)))
        q_error = float(np.abs(outputs - reference).mean() / max(np.abs(reference).mean(), 1e-8))
        return {"agreement": agreement, "q_error": q_error}
    difference = np.abs(outputs - reference)
    norms = np.maximum(np.linalg.norm(reference, axis=1), 1e-8)
    return {
        "agreement": float(1.0 - np.clip(difference.mean() / 2.0, 0.0, 1.0)),
        "action_error": float(np.mean(np.linalg.norm(outputs - reference, axis=1) / norms)),
    }


@ray.remote
class ParameterQuantizer:
    """Turns the learner's newest fp32 weights into what actors load, and serves it to their pulls.

    ``comm_bits`` 32: the actors' policy itself, built here at the actors' precision (an int8 policy holds one byte
    per weight) once per new version however many actors pull it, and serialized (ONNX or a pickled module). ``comm_bits`` below 32 (the paper's
    q_c ablation): the weights bit-packed at ``comm_bits``; each actor builds its policy from them.
    """

    def __init__(
        self, comm_bits: int, precision: str, int8_backend: str, action_space: Any, obs_dim: int, arch: list[int]
    ) -> None:
        torch.set_num_threads(1)
        self.comm_bits, self.precision, self.int8_backend = comm_bits, precision, int8_backend
        self.net = network_for(action_space, obs_dim, arch) if comm_bits == 32 else None
        self.reference_net = network_for(action_space, obs_dim, arch)  # the learner's fp32 policy, for mismatch
        self.discrete = hasattr(action_space, "n")
        self.history: dict[int, dict[str, torch.Tensor]] = {}  # recent versions' fp32 weights, for mismatch
        self.mismatch: list[dict[str, float]] = []
        self.started = time.perf_counter()
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
        self.history[self.version] = weights
        self.history.pop(self.version - HISTORY, None)
        return self.version

    def record_mismatch(self, version: int, actor: int, observations: np.ndarray, outputs: np.ndarray) -> None:
        """Compare an actor's policy outputs (at its precision, version ``version``) with the learner's fp32 policy
        of that version on the same observations, and keep the point (see :func:`policy_mismatch`)."""
        weights = self.history.get(version)
        if weights is None:
            return
        self.reference_net.load_state_dict(weights)
        with torch.inference_mode():
            reference = self.reference_net(torch.as_tensor(observations)).numpy()
        point = policy_mismatch(outputs, reference, self.discrete)
        self.mismatch.append(
            {"seconds": time.perf_counter() - self.started, "version": version, "actor": actor, **point}
        )

    def mismatch_series(self) -> list[dict[str, float]]:
        return list(self.mismatch)

    def _build(self) -> float:
        """Build the broadcast for the newest version if not done yet; returns the seconds it took."""
        if self.built_version == self.version:
            return 0.0
        start = time.perf_counter()
        assert self.weights is not None  # the driver publishes the learner's weights before any actor starts
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
        assert self.payload is not None  # built just now
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
