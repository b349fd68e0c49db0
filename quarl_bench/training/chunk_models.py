"""The two robot-policy shapes made here: an ACT-style chunking transformer and a state-based Diffusion Policy
denoiser (an MLP over the noisy chunk, the observation and a sinusoidal timestep embedding).

Both take flat observations (a Dict env's keys concatenated in its space's order, as the chunked policy passes
them), normalise them with the demonstrations' statistics (buffers, so a checkpoint carries them), and declare
their shape on themselves (``action_chunk`` / ``denoising``), as :mod:`quarl_bench.zoo.chunked` reads it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn


class Normalised(nn.Module):
    """Observation statistics as buffers: ``(x - mean) / std``."""

    obs_mean: torch.Tensor
    obs_std: torch.Tensor

    def __init__(self, obs_dim: int) -> None:
        super().__init__()
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_std", torch.ones(obs_dim))

    def normalise(self, observation: torch.Tensor) -> torch.Tensor:
        return (observation.float() - self.obs_mean) / self.obs_std


class SelfAttention(nn.Module):
    """Multi-head self-attention from four ``Linear`` layers: every weight is a layer PTQ quantizes, as an int8
    graph's MatMuls are (``nn.MultiheadAttention``'s packed input projection is no ``Linear``); the scores and their
    softmax stay fp32 on both sides."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads, self.size = heads, width // heads
        self.query, self.key, self.value, self.out = (nn.Linear(width, width) for _ in range(4))
        self.softmax = nn.Softmax(dim=-1)  # a module, so that --softmax-bits can round its output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        size = self.size  # a constant of the module (the trace keeps the batch and token counts dynamic)

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(batch, tokens, self.heads, size).transpose(1, 2)

        query, key, value = split(self.query(x)), split(self.key(x)), split(self.value(x))
        weights = self.softmax(query @ key.transpose(-2, -1) / math.sqrt(size))
        return self.out((weights @ value).transpose(1, 2).reshape(batch, tokens, width))


class EncoderLayer(nn.Module):
    """A post-norm transformer encoder layer (``nn.TransformerEncoderLayer``'s default order, ReLU, no dropout)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attention, self.norm1 = SelfAttention(width, heads), nn.LayerNorm(width)
        self.feed = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, width))
        self.norm2 = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.feed(x))


class ChunkTransformer(Normalised):
    """ACT's decoder shape without its CVAE: one observation token and ``size`` learned query tokens through a
    transformer encoder (LayerNorm, softmax attention); each query token's output is one action of the chunk."""

    def __init__(self, obs_dim: int, action_dim: int, size: int, execute: int, width: int = 64) -> None:
        super().__init__(obs_dim)
        self.embed = nn.Linear(obs_dim, width)
        self.queries = nn.Parameter(torch.randn(size, width) * 0.02)
        self.encoder = nn.Sequential(EncoderLayer(width, 4), EncoderLayer(width, 4))
        self.head = nn.Linear(width, action_dim)
        self.action_chunk = {"size": size, "execute": execute}
        self.config = {"obs_dim": obs_dim, "action_dim": action_dim, "size": size, "execute": execute, "width": width}

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        token = self.embed(self.normalise(observation))[:, None]
        tokens = torch.cat([token, self.queries.expand(token.shape[0], -1, -1)], dim=1)
        return torch.tanh(self.head(self.encoder(tokens)[:, 1:]))  # (batch, size, action_dim) in [-1, 1]


def timestep_embedding(timestep: torch.Tensor, width: int) -> torch.Tensor:
    """Diffusion Policy's sinusoidal position embedding of the (integer) timestep."""
    half = width // 2
    frequencies = torch.exp(-math.log(10_000) * torch.arange(half, dtype=torch.float32) / (half - 1))
    angles = timestep.float()[:, None] * frequencies[None]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class ChunkDenoiser(Normalised):
    """ε(a_t, t, obs) for a chunk of ``size`` actions: an MLP (Mish) over the flat noisy chunk, the normalised
    observation and the timestep embedding passed through its own two layers."""

    def __init__(
        self, obs_dim: int, action_dim: int, size: int, execute: int, steps: int = 10, width: int = 256
    ) -> None:
        super().__init__(obs_dim)
        self.size, self.action_dim, self.embedding = size, action_dim, 32
        self.time = nn.Sequential(nn.Linear(self.embedding, 64), nn.Mish(), nn.Linear(64, 64))
        inputs = size * action_dim + obs_dim + 64
        self.net = nn.Sequential(
            nn.Linear(inputs, width), nn.Mish(), nn.Linear(width, width), nn.Mish(), nn.Linear(width, size * action_dim)
        )
        self.denoising = {"size": size, "execute": execute, "scheduler": "ddim", "steps": steps, "train_steps": 100}
        self.config = {"obs_dim": obs_dim, "action_dim": action_dim, "size": size, "execute": execute, "steps": steps}
        self.config["width"] = width

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor, observation: torch.Tensor) -> torch.Tensor:
        time = self.time(timestep_embedding(timestep, self.embedding))
        inputs = torch.cat([sample.flatten(1), self.normalise(observation), time], dim=-1)
        return self.net(inputs).reshape(sample.shape[0], self.size, self.action_dim)


KINDS: dict[str, type[nn.Module]] = {"act": ChunkTransformer, "diffusion": ChunkDenoiser}


def save(module: nn.Module, kind: str, path: Path) -> None:
    """The module's weights, statistics and constructor arguments in one file."""
    torch.save({"kind": kind, "config": module.config, "state": module.state_dict()}, path)


def load(path: Path | str) -> Any:
    """A saved chunk model, ready to act (eval mode)."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    module = KINDS[saved["kind"]](**saved["config"])
    module.load_state_dict(saved["state"])
    return module.eval()
