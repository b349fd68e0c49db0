"""Denoising policies (Diffusion-Policy-shaped): a denoiser run under a named scheduler turns seeded noise into a
chunk of actions, executed open-loop like any chunk (:mod:`quarl_bench.zoo.chunked`).

A ``--policy-module`` function declares the shape on the module it returns, as ``module.denoising``::

    {"size": 8, "execute": 4, "scheduler": "ddim", "steps": 10,
     "train_steps": 100, "prediction": "epsilon", "beta_schedule": "squaredcos_cap_v2"}

``scheduler`` is diffusers' ``ddim`` or ``ddpm`` (the last three keys are optional: Diffusion Policy's defaults).
``module(sample, timestep, observation)`` predicts the noise (``epsilon``) or the clean chunk (``sample``) for a noisy
chunk ``(batch, size, action_dim)`` at integer ``timestep`` ``(batch,)``. The chunk is denoised in [-1, 1] (clipped,
as Diffusion Policy does) and mapped onto the env's Box.

**Pairing.** The noise is the episode's own: each episode's generator is seeded by the bytes of its first
observation, and the c-th chunk of the episode draws from ``(that seed, c)``. Paired episodes start from the same
seeded reset, so fp32 and a quantized copy draw the same initial and per-step noise for each chunk, whatever their
trajectories do afterwards; nothing in the evaluation needs to know which episode it plays.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.chunked import ChunkedModulePolicy, ChunkShape

SCHEDULERS = ("ddim", "ddpm")
PREDICTIONS = ("epsilon", "sample")
REQUIRED = {"size", "execute", "scheduler", "steps"}
OPTIONAL = {"train_steps": 100, "prediction": "epsilon", "beta_schedule": "squaredcos_cap_v2"}


@dataclass(frozen=True)
class DenoisingShape(ChunkShape):
    """A chunk made by ``steps`` steps of ``scheduler`` from noise, ``execute`` of its ``size`` actions played."""

    scheduler: str = "ddim"
    steps: int = 10
    train_steps: int = 100
    prediction: str = "epsilon"
    beta_schedule: str = "squaredcos_cap_v2"

    @classmethod
    def declared(cls, declaration: Any, source: str) -> DenoisingShape:
        """The shape a module declares (``module.denoising``).

        :raises QuarlError: for a missing or unknown key, an unknown scheduler or prediction, a bad step count.
        """
        accepted = (
            "expected {'size': K, 'execute': N, 'scheduler': 'ddim'|'ddpm', 'steps': S} and optionally "
            "'train_steps', 'prediction' ('epsilon'|'sample'), 'beta_schedule'"
        )
        if not isinstance(declaration, dict) or not REQUIRED <= set(declaration) <= REQUIRED | set(OPTIONAL):
            raise QuarlError(f"bad denoising {declaration!r} of {source}: {accepted}")
        chunk = ChunkShape.declared({"size": declaration["size"], "execute": declaration["execute"]}, source)
        fields = OPTIONAL | {name: declaration[name] for name in declaration if name in OPTIONAL}
        scheduler, steps = declaration["scheduler"], declaration["steps"]
        if scheduler not in SCHEDULERS:
            raise QuarlError(f"unknown denoising scheduler {scheduler!r} of {source}: expected one of {SCHEDULERS}")
        if fields["prediction"] not in PREDICTIONS:
            raise QuarlError(f"bad denoising prediction {fields['prediction']!r} of {source}: expected {PREDICTIONS}")
        train = fields["train_steps"]
        if not isinstance(train, int) or not isinstance(steps, int) or not 1 <= steps <= train:
            raise QuarlError(f"bad denoising steps {steps!r} of {source}: expected 1 <= steps <= train_steps {train!r}")
        return cls(chunk.size, execute=chunk.execute, scheduler=scheduler, steps=steps, **fields)

    def label(self) -> str:
        """``chunk 8, 4 executed; ddim 10 steps (epsilon, 100 trained)``: what the certificate names."""
        return f"{super().label()}; {self.scheduler} {self.steps} steps ({self.prediction}, {self.train_steps} trained)"

    def make_scheduler(self) -> Any:
        """diffusers' scheduler of this name, set to ``steps`` inference steps."""
        from diffusers import DDIMScheduler, DDPMScheduler

        kind = DDIMScheduler if self.scheduler == "ddim" else DDPMScheduler
        scheduler: Any = kind(
            num_train_timesteps=self.train_steps,
            beta_schedule=self.beta_schedule,
            clip_sample=True,
            prediction_type=self.prediction,
        )
        scheduler.set_timesteps(self.steps)
        return scheduler


def episode_seed(observation: np.ndarray) -> int:
    """The noise seed of an episode that starts at ``observation``: its float32 bytes, hashed."""
    digest = hashlib.sha256(np.ascontiguousarray(observation, np.float32).tobytes()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def chunk_generator(seed: int, call: int) -> torch.Generator:
    """The generator of an episode's ``call``-th chunk."""
    state = np.random.SeedSequence([seed, call]).generate_state(2, np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 31 | int(state[1]) >> 1)


class DenoisingModulePolicy(ChunkedModulePolicy):
    """A denoising module acting like a recurrent SB3 policy: its state is the open-loop queue plus each env's
    episode seed and chunk count; ``decision_values`` denoises each observation from its own seed."""

    chunk: DenoisingShape

    def __init__(self, observation_space: Any, action_space: Any, module: torch.nn.Module, chunk: Any) -> None:
        super().__init__(observation_space, action_space, module, chunk)

    @cached_property
    def scheduler(self) -> Any:
        return self.chunk.make_scheduler()

    def denoise(self, observation: torch.Tensor, generators: list[torch.Generator]) -> list[torch.Tensor]:
        """Every step's sample, from the initial noise to the final chunk ``(batch, size, action_dim)`` in [-1, 1]."""
        observation = observation.float()
        batch, shape = len(observation), (self.chunk.size, self.action_dim)
        sample = torch.stack([torch.randn(shape, generator=generator) for generator in generators])
        samples = [sample]
        for timestep in self.scheduler.timesteps:
            predicted = self.module(sample, timestep.expand(batch), observation)
            if tuple(predicted.shape) != (batch, *shape):
                raise QuarlError(
                    f"bad action chunk: the denoiser returned shape {tuple(predicted.shape)} for a noisy chunk of "
                    f"shape {(batch, *shape)}; its denoising declares {shape[0]} actions of {self.action_space}"
                )
            # DDPM draws each step's noise from each env's own generator; DDIM (eta 0) draws none
            sample = self.scheduler.step(predicted, timestep, sample, generator=generators).prev_sample
            samples.append(sample)
        return samples

    def chunks(self, observation: torch.Tensor, keys: np.ndarray | None = None) -> torch.Tensor:
        """``(batch, size, action_dim)`` on the env's Box; ``keys`` ``(batch, 2)`` are (episode seed, chunk count),
        by default each observation's own seed and its first chunk."""
        if keys is None:
            keys = np.array([[episode_seed(row), 0] for row in observation.cpu().numpy()], dtype=object)
        generators = [chunk_generator(int(seed), int(call)) for seed, call in keys]
        unit = self.denoise(observation, generators)[-1]
        low = torch.as_tensor(self.box.low.reshape(-1), dtype=torch.float32)
        high = torch.as_tensor(self.box.high.reshape(-1), dtype=torch.float32)
        return low + (unit.clamp(-1.0, 1.0) + 1.0) / 2.0 * (high - low)

    def _fresh(self, batch: int) -> tuple[np.ndarray, ...]:
        queue, position = super()._fresh(batch)
        return queue, position, np.zeros(batch, np.uint64), np.zeros(batch, np.int64)

    def _open_loop(self, observation: np.ndarray, state: tuple, starts: np.ndarray) -> tuple[np.ndarray, tuple]:
        queue, position, seeds, calls = state
        for env in np.flatnonzero(starts):
            seeds[env], calls[env] = episode_seed(observation[env]), 0
        ask = starts | (position >= self.chunk.execute)
        if ask.any():
            keys = np.stack([seeds[ask].astype(object), calls[ask].astype(object)], axis=1)
            with torch.no_grad():
                queue[ask] = self.chunks(torch.as_tensor(observation[ask]), keys).cpu().numpy()
            position[ask], calls[ask] = 0, calls[ask] + 1
        actions = queue[np.arange(len(queue)), position]
        return actions, (queue, position + 1, seeds, calls)
