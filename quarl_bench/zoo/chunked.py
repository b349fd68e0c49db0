"""Action-chunking policies (ACT-shaped): a torch module maps one observation to a chunk of ``size`` future actions.

A ``--policy-module`` function declares the shape on the module it returns, as ``module.action_chunk``:

- ``{"size": k, "execute": n}``: the chunk is executed open-loop, its first ``n`` actions (1 ≤ n ≤ k) one per step,
  then the module is asked again (ACT without ensembling, Diffusion Policy's ``n_action_steps``);
- ``{"size": k, "ensemble": m}``: the module is asked at every step, and the action played is ACT's temporal
  ensemble: the weighted average of the actions the last k chunks predicted for this step, ACT's ``w_i = exp(-m i)``
  with ``i = 0`` the oldest of those predictions (the oldest weighs most; m = 0 is the plain average).

The module's output for a batch is ``(batch, k, *action_shape)`` or ``(batch, k * action_dim)``. The policy carries
its pending actions (open loop) or its recent chunks (ensemble) as its state, reset where an episode starts, so
evaluation treats it as a recurrent policy: each env's episode is its own, and fp32 and a quantized copy of a pair
play the same observations into the same state machine. It draws no noise of its own, so pairs stay paired.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.foreign import UserModulePolicy


@dataclass(frozen=True)
class ChunkShape:
    """A chunk of ``size`` actions, ``execute`` of them open-loop, or a temporal ensemble of weight ``ensemble``."""

    size: int
    execute: int | None = None
    ensemble: float | None = None

    @classmethod
    def declared(cls, declaration: Any, source: str) -> ChunkShape:
        """The shape a module declares (``module.action_chunk``).

        :raises QuarlError: for a declaration that is not one of the two forms, naming what is accepted.
        """
        accepted = "expected {'size': K, 'execute': N} (1 <= N <= K) or {'size': K, 'ensemble': M} (M >= 0)"
        if not isinstance(declaration, dict) or set(declaration) not in ({"size", "execute"}, {"size", "ensemble"}):
            raise QuarlError(f"bad action_chunk {declaration!r} of {source}: {accepted}")
        size = declaration["size"]
        if not isinstance(size, int) or size < 1:
            raise QuarlError(f"bad action_chunk size {size!r} of {source}: {accepted}")
        if "execute" in declaration:
            execute = declaration["execute"]
            if not isinstance(execute, int) or not 1 <= execute <= size:
                raise QuarlError(f"bad action_chunk execute {execute!r} of {source}: {accepted}")
            return cls(size, execute=execute)
        weight = declaration["ensemble"]
        if not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
            raise QuarlError(f"bad action_chunk ensemble {weight!r} of {source}: {accepted}")
        return cls(size, ensemble=float(weight))

    def label(self) -> str:
        """``chunk 10, 5 executed`` or ``chunk 10, ensembled (m 0.01)``: what the certificate names."""
        how = f"{self.execute} executed" if self.execute is not None else f"ensembled (m {self.ensemble:g})"
        return f"chunk {self.size}, {how}"


class ChunkedModulePolicy(UserModulePolicy):
    """A chunking module acting like a recurrent SB3 policy: ``predict`` carries its chunk state, ``decision_values``
    is a batch's chunks' first actions (what a state's greedy action is, and what PTQ's fidelity reads)."""

    carries_state = True

    def __init__(
        self, observation_space: spaces.Space, action_space: spaces.Space, module: nn.Module, chunk: ChunkShape
    ) -> None:
        if not isinstance(action_space, spaces.Box):
            raise QuarlError(f"bad action chunk: chunking policies act in a Box action space, not {action_space}")
        super().__init__(observation_space, action_space, module)
        self.chunk, self.box = chunk, action_space
        self.shape: tuple[int, ...] = tuple(action_space.shape)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return super()._get_constructor_parameters() | {"chunk": self.chunk}

    @property
    def action_dim(self) -> int:
        return int(np.prod(self.shape))

    def chunks(self, observation: torch.Tensor) -> torch.Tensor:
        """``(batch, size, action_dim)``: each observation's chunk.

        :raises QuarlError: for a module whose output is not ``size`` actions of the env's action space.
        """
        out = self.module(observation.float())
        batch, size, dim = out.shape[0], self.chunk.size, self.action_dim
        if tuple(out.shape) not in ((batch, size * dim), (batch, size, dim), (batch, size, *self.shape)):
            raise QuarlError(
                f"bad action chunk: the module returned shape {tuple(out.shape)} for {batch} observations; its "
                f"action_chunk declares {size} actions of {self.action_space} (expected ({batch}, {size}, {dim}) or "
                f"({batch}, {size * dim}))"
            )
        return out.reshape(batch, size, dim)

    def flat(self, observation: Any) -> np.ndarray:
        """``(batch, obs_dim)`` float32: a Dict observation's keys concatenated in its space's order."""
        if isinstance(self.observation_space, spaces.Dict) and isinstance(observation, dict):
            parts = [np.asarray(observation[key], np.float32) for key in self.observation_space.spaces]
            return np.concatenate([part.reshape(len(part), -1) for part in parts], axis=1)
        return np.asarray(observation, dtype=np.float32)

    def decision_values(self, observation: Any) -> torch.Tensor:
        if isinstance(observation, dict):  # SB3's tensors of a Dict observation: flat in the space's order
            keys = getattr(self.observation_space, "spaces", observation)
            observation = torch.cat([torch.as_tensor(observation[key]).flatten(1).float() for key in keys], 1)
        return self.chunks(observation)[:, 0].reshape(-1, *self.shape)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):  # noqa: ANN001
        """One action per env, and the chunk state to pass next (reset where ``episode_start`` is set)."""
        observation = self.flat(observation)
        batch = len(observation)
        state = self._fresh(batch) if state is None else tuple(np.array(part, copy=True) for part in state)
        starts = np.ones(batch, bool) if episode_start is None else np.asarray(episode_start, bool)
        if self.chunk.execute is not None:
            actions, state = self._open_loop(observation, state, starts)
        else:
            actions, state = self._ensembled(observation, state, starts)
        low, high = self.box.low.reshape(-1), self.box.high.reshape(-1)
        actions = np.clip(actions, low, high).reshape(batch, *self.shape)
        return actions.astype(self.box.dtype), state

    def _fresh(self, batch: int) -> tuple[np.ndarray, ...]:
        size, dim = self.chunk.size, self.action_dim
        if self.chunk.execute is not None:
            return np.zeros((batch, size, dim), np.float32), np.full(batch, size, np.int64)  # nothing pending
        return np.zeros((batch, size, size, dim), np.float32), np.zeros(batch, np.int64)  # no chunk made yet

    def _predicted(self, observation: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.chunks(torch.as_tensor(observation)).cpu().numpy()

    def _open_loop(self, observation: np.ndarray, state: tuple, starts: np.ndarray) -> tuple[np.ndarray, tuple]:
        queue, position = state
        ask = starts | (position >= self.chunk.execute)
        if ask.any():
            queue[ask] = self._predicted(observation[ask])
            position[ask] = 0
        actions = queue[np.arange(len(queue)), position]
        return actions, (queue, position + 1)

    def _ensembled(self, observation: np.ndarray, state: tuple, starts: np.ndarray) -> tuple[np.ndarray, tuple]:
        """ACT's temporal ensemble: ``history[:, i]`` is the chunk made i steps ago; its action for now is its
        entry ``i``; the ``made`` most recent chunks (at most size) are averaged, the oldest weighted most."""
        history, made = state
        history[starts], made[starts] = 0.0, 0
        history = np.concatenate([self._predicted(observation)[:, None], history[:, :-1]], axis=1)
        made = np.minimum(made + 1, self.chunk.size)
        ages = np.arange(self.chunk.size)
        for_now = history[:, ages, ages]  # (batch, size, dim): the chunk made i steps ago, at its step i
        # ACT numbers the predictions from the oldest (i = 0, weight 1) to the newest (weight exp(-m (n - 1)))
        order = (made[:, None] - 1 - ages[None, :]).astype(float)  # 0 for the oldest chunk still held
        weights = np.where(ages[None, :] < made[:, None], np.exp(-(self.chunk.ensemble or 0.0) * order), 0.0)
        actions = (weights[:, :, None] * for_now).sum(axis=1) / weights.sum(axis=1, keepdims=True)
        return actions, (history, made)
