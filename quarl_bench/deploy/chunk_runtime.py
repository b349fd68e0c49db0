"""The runtime of a chunk artifact (``runtime.py`` in its folder): an ONNX graph and its sidecar (``chunk.json``)
played as the policy it was exported from, with numpy and ONNX Runtime only (no torch, no quarl-bench).

- *chunked* (ACT-shaped): the graph maps observations ``obs`` to a ``chunk`` ``(batch, size, action_dim)`` in the
  env's units; the runtime executes its first ``execute`` actions open-loop, or ACT's temporal ensemble of the last
  ``size`` chunks (``w_i = exp(-m i)``, the oldest weighing most);
- *denoising* (Diffusion-Policy-shaped): the graph is the denoiser ``prediction = f(sample, timestep, obs)``; the
  runtime runs the sidecar's scheduler (DDIM with eta 0, or DDPM's fixed-small variance, as diffusers steps them)
  from the chunk's noise and maps the final chunk from [-1, 1] onto the action bounds.

Before the graph the runtime normalises observations, ``(obs - mean) / std`` with the sidecar's statistics. A
chunk's noise comes from ``noise(seed, call)``: by default numpy's generator on ``[seed, call]``, where ``seed`` is
the episode's (its first observation's float32 bytes, hashed) and ``call`` the chunk's number in the episode; a
caller replaying recorded noise passes its own. Usage::

    runtime = ChunkRuntime("policy.onnx", json.load(open("chunk.json")))
    state = runtime.zero_state(1)
    action, state = runtime.step(obs[None], state)   # zero the state's rows where an episode starts
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

Noise = Callable[[int, int], tuple[np.ndarray, np.ndarray]]  # (seed, call) -> (initial, per-step noise)
SHAPES = ("chunked", "denoising")


def episode_seed(observation: np.ndarray) -> int:
    """The noise seed of an episode that starts at ``observation``: its float32 bytes, hashed."""
    digest = hashlib.sha256(np.ascontiguousarray(observation, np.float32).tobytes()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class ChunkRuntime:
    """A chunk artifact: ``chunks`` (a batch's chunks from given noise), ``step`` (one action per env, carrying the
    state), ``zero_state`` (what an episode starts from: every part zero)."""

    def __init__(self, graph: str | bytes, sidecar: dict[str, Any], threads: int = 1, noise: Noise | None = None):
        import onnxruntime as ort

        self.sidecar, self.shape = sidecar, sidecar["shape"]
        self.size, self.dim = int(sidecar["size"]), int(sidecar["action_dim"])
        self.execute, self.ensemble = sidecar.get("execute"), sidecar.get("ensemble")
        self.low = np.asarray(sidecar["action_low"], np.float32)
        self.high = np.asarray(sidecar["action_high"], np.float32)
        statistics = sidecar["normalization"]["observation"]
        self.mean = np.asarray(statistics["mean"], np.float32)
        self.std = np.asarray(statistics["std"], np.float32)
        self.noise = noise or self.numpy_noise
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.log_severity_level = 3
        self.session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}  # an input the module ignores was pruned
        if self.shape == "denoising":
            loop = sidecar["denoising"]
            self.timesteps = np.asarray(loop["timesteps"], np.int64)
            self.previous = np.asarray(loop["previous_timesteps"], np.int64)
            self.alphas = np.asarray(loop["alphas_cumprod"], np.float32)
            self.final_alpha = np.float32(loop["final_alpha_cumprod"])

    def numpy_noise(self, seed: int, call: int) -> tuple[np.ndarray, np.ndarray]:
        """A chunk's initial sample and each step's noise, from numpy's generator on ``[seed, call]``."""
        generator = np.random.default_rng([seed, call])
        initial = generator.standard_normal((self.size, self.dim), dtype=np.float32)
        return initial, generator.standard_normal((len(self.timesteps), self.size, self.dim), dtype=np.float32)

    def normalised(self, observation: np.ndarray) -> np.ndarray:
        return ((np.asarray(observation, np.float32) - self.mean) / self.std).astype(np.float32)

    def chunks(self, observation: np.ndarray, noise: list[tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
        """``(batch, size, action_dim)`` in the env's units (unclipped: the action played is clipped); a denoising
        artifact's from each row's ``noise``. The graph sees one observation per call, as deployed: a dynamically
        quantized graph takes its activation ranges from the batch it is given."""
        obs = self.normalised(observation)
        if self.shape == "chunked":
            rows = [self.session.run(None, {"obs": obs[i : i + 1]})[0] for i in range(len(obs))]
            return np.concatenate(rows).reshape(len(obs), self.size, self.dim)
        assert noise is not None and len(noise) == len(obs)  # a denoising chunk starts from its noise
        unit = np.concatenate(
            [self.denoised(obs[i : i + 1], noise[i][0][None], noise[i][1][None]) for i in range(len(obs))]
        )
        return self.low + (np.clip(unit, -1.0, 1.0) + 1.0) / 2.0 * (self.high - self.low)

    def denoised(self, obs: np.ndarray, sample: np.ndarray, step_noise: np.ndarray) -> np.ndarray:
        """The scheduler's loop from ``sample`` (in [-1, 1] at the end), as diffusers' ``step`` computes it."""
        loop = self.sidecar["denoising"]
        sample = sample.astype(np.float32)
        for index, (t, previous) in enumerate(zip(self.timesteps, self.previous, strict=True)):
            timestep = np.full(len(obs), t, np.int64)
            given = {"sample": sample, "timestep": timestep, "obs": obs}
            predicted = self.session.run(None, {k: v for k, v in given.items() if k in self.inputs})[0]
            alpha = self.alphas[t]
            alpha_prev = self.alphas[previous] if previous >= 0 else self.final_alpha
            beta = np.float32(1) - alpha
            if loop["prediction"] == "epsilon":
                original, epsilon = (sample - beta**0.5 * predicted) / alpha**0.5, predicted
            else:
                original = predicted
                epsilon = (sample - alpha**0.5 * original) / beta**0.5
            original = np.clip(original, -1.0, 1.0)
            if loop["scheduler"] == "ddim":  # eta 0: deterministic given the initial sample
                sample = alpha_prev**0.5 * original + (np.float32(1) - alpha_prev) ** 0.5 * epsilon
                continue
            current_alpha = alpha / alpha_prev
            current_beta = np.float32(1) - current_alpha
            mean = (alpha_prev**0.5 * current_beta / beta) * original
            mean = mean + (current_alpha**0.5 * (np.float32(1) - alpha_prev) / beta) * sample
            if t > 0:  # fixed-small variance
                variance = np.maximum((np.float32(1) - alpha_prev) / beta * current_beta, np.float32(1e-20))
                mean = mean + variance**0.5 * step_noise[:, index]
            sample = mean.astype(np.float32)
        return sample

    def zero_state(self, batch: int) -> tuple[np.ndarray, ...]:
        """Open loop: (queue, actions left, episode seed, chunks made); ensemble: (chunks by age, chunks made)."""
        if self.execute is not None:
            queue = np.zeros((batch, self.size, self.dim), np.float32)
            return queue, np.zeros(batch, np.int64), np.zeros(batch, np.uint64), np.zeros(batch, np.int64)
        return np.zeros((batch, self.size, self.size, self.dim), np.float32), np.zeros(batch, np.int64)

    @staticmethod
    def started(state: tuple[np.ndarray, ...], starts: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """The state with the rows of envs whose episode starts zeroed."""
        if starts is None:
            return state
        fresh = np.asarray(starts, bool)
        parts = tuple(np.array(part, copy=True) for part in state)
        for part in parts:
            part[fresh] = 0
        return parts

    def step(self, observation: np.ndarray, state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, tuple]:
        """One action per env ``(batch, action_dim)`` and the state to pass next."""
        observation = np.asarray(observation, np.float32).reshape(len(observation), -1)
        if self.execute is None:
            return self._ensembled(observation, state)
        queue, left, seeds, calls = (np.array(part, copy=True) for part in state)
        ask = left <= 0
        for env in np.flatnonzero(ask & (calls == 0)):  # an episode's first chunk: its seed from its first obs
            seeds[env] = episode_seed(observation[env])
        if ask.any():
            rows = np.flatnonzero(ask)
            noise = (
                [self.noise(int(seeds[env]), int(calls[env])) for env in rows] if self.shape == "denoising" else None
            )
            queue[rows] = self.chunks(observation[rows], noise)
            left[rows], calls[rows] = self.execute, calls[rows] + 1
        actions = queue[np.arange(len(queue)), self.execute - left]
        return np.clip(actions, self.low, self.high), (queue, left - 1, seeds, calls)

    def _ensembled(self, observation: np.ndarray, state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, tuple]:
        history, made = state
        history = np.concatenate([self.chunks(observation)[:, None], history[:, :-1]], axis=1)
        made = np.minimum(made + 1, self.size)
        ages = np.arange(self.size)
        for_now = history[:, ages, ages]  # the chunk made i steps ago, at its step i
        order = (made[:, None] - 1 - ages[None, :]).astype(np.float64)  # 0 for the oldest chunk still held
        weights = np.where(ages[None, :] < made[:, None], np.exp(-float(self.ensemble or 0.0) * order), 0.0)
        actions = (weights[:, :, None] * for_now).sum(axis=1) / weights.sum(axis=1, keepdims=True)
        return np.clip(actions, self.low, self.high).astype(np.float32), (history, made)

    def first_actions(self, observation: np.ndarray, noise: list | None = None) -> np.ndarray:
        """Each observation's action from a fresh state (its chunk's first; its own episode's first noise)."""
        observation = np.asarray(observation, np.float32).reshape(len(observation), -1)
        if self.shape == "denoising" and noise is None:
            noise = [self.noise(episode_seed(row), 0) for row in observation]
        return np.clip(self.chunks(observation, noise)[:, 0], self.low, self.high)
