"""Which policy a chunk-declaring module becomes: its declared shape (``action_chunk``, or ``denoising``) read once,
and the policy that plays it (:mod:`quarl_bench.zoo.chunked`, :mod:`quarl_bench.zoo.denoising`)."""

from __future__ import annotations

from functools import cache

from gymnasium import spaces
from torch import nn

from quarl_bench.zoo.chunked import ChunkedModulePolicy, ChunkShape
from quarl_bench.zoo.denoising import DenoisingModulePolicy, DenoisingShape


def declared_chunk(module: nn.Module, source: str) -> ChunkShape | None:
    """The module's declared chunk shape, a denoising one included (None: it maps an observation to one action)."""
    if getattr(module, "denoising", None) is not None:
        return DenoisingShape.declared(module.denoising, source)
    declaration = getattr(module, "action_chunk", None)
    return None if declaration is None else ChunkShape.declared(declaration, source)


def chunked_policy(
    observation_space: spaces.Space, action_space: spaces.Space, module: nn.Module, chunk: ChunkShape
) -> ChunkedModulePolicy:
    """The policy that plays ``chunk``: a denoising loop where it declares one."""
    kind = DenoisingModulePolicy if isinstance(chunk, DenoisingShape) else ChunkedModulePolicy
    return kind(observation_space, action_space, module, chunk)


@cache
def chunk_label(model_path: str) -> str:
    """The chunk a ``--policy-module`` (or registered module) declares, as a certificate names it; '' for none."""
    from quarl_bench.zoo.foreign import load_module_function

    chunk = declared_chunk(load_module_function(model_path), model_path)
    return chunk.label() if chunk else ""
