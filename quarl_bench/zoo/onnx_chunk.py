"""An ONNX chunk or denoising graph with its JSON sidecar (``chunk.json`` beside the graph), as LeRobot-style exports
ship them: ``--model policy.onnx`` then plays the chunk loop (:mod:`quarl_bench.zoo.chunked`,
:mod:`quarl_bench.zoo.denoising`) around the graph on ONNX Runtime.

The sidecar (what ``quarl-bench export`` writes for a chunk policy; only these keys are read)::

    {"shape": "chunked", "size": 4, "execute": 2,                    # or "ensemble": m
     "normalization": {"observation": {"mean": [...], "std": [...]}}}
    {"shape": "denoising", "size": 4, "execute": 2,
     "denoising": {"scheduler": "ddim", "steps": 10, "train_steps": 100, "prediction": "epsilon"},
     "normalization": {"observation": {"mean": [...], "std": [...]}}}

The graph takes ``obs`` (normalised as ``(obs - mean) / std``) and returns the chunk in the env's units, or (a
denoiser) takes ``sample``, ``timestep`` (int64) and ``obs`` and returns its prediction. Its Gemm/MatMul weights are
torch layers (:class:`~quarl_bench.zoo.foreign.OnnxLayers`), so PTQ quantizes them as any module's; the session is
built from the current weights at the first call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.chunked import ChunkShape
from quarl_bench.zoo.denoising import OPTIONAL, REQUIRED, DenoisingShape

SIDECAR = "chunk.json"


def sidecar_of(graph_path: str | Path) -> Path | None:
    """The sidecar beside a graph, where there is one."""
    path = Path(graph_path).with_name(SIDECAR)
    return path if path.is_file() else None


def read_sidecar(path: Path, observation_dim: int | None) -> tuple[ChunkShape, dict[str, Any]]:
    """The chunk shape a sidecar declares and its normalisation statistics.

    :raises QuarlError: for a file that is not JSON, an unknown shape or scheduler, a bad chunk, or statistics that
        are missing or not ``observation_dim`` long.
    """
    source = str(path)
    try:
        sidecar = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise QuarlError(f"cannot read the sidecar {source!r}: {error}; expected a JSON object") from error
    shape = sidecar.get("shape") if isinstance(sidecar, dict) else None
    if shape not in ("chunked", "denoising"):
        raise QuarlError(f"bad sidecar {source!r}: shape {shape!r}; expected 'chunked' or 'denoising'")
    declared = {key: sidecar[key] for key in ("size", "execute", "ensemble") if sidecar.get(key) is not None}
    if shape == "chunked":
        chunk: ChunkShape = ChunkShape.declared(declared, source)
    else:
        loop = sidecar.get("denoising") or {}
        keys = (REQUIRED | set(OPTIONAL)) - {"size", "execute"}
        chunk = DenoisingShape.declared(declared | {k: v for k, v in loop.items() if k in keys}, source)
    statistics = (sidecar.get("normalization") or {}).get("observation") or {}
    for name in ("mean", "std"):
        values = statistics.get(name)
        if not isinstance(values, list) or observation_dim not in (None, len(values)):
            found = f"{len(values)} values" if isinstance(values, list) else repr(values)
            raise QuarlError(
                f"sidecar {source!r} has no observation normalisation {name}"
                + (f" of {observation_dim} values" if observation_dim is not None else "")
                + f" (found {found}): expected normalization.observation.mean and .std, one per observation "
                "feature (0 and 1 where the graph normalises itself)"
            )
    if min(statistics["std"]) <= 0:
        raise QuarlError(f"sidecar {source!r} has a std <= 0: expected positive normalisation std values")
    return chunk, statistics


class OnnxChunkModule(nn.Module):
    """A chunk graph as a module: ``forward(obs)`` (chunker) or ``forward(sample, timestep, obs)`` (denoiser) on
    ONNX Runtime, observations normalised with the sidecar's statistics first."""

    obs_mean: torch.Tensor
    obs_std: torch.Tensor

    def __init__(self, graph: bytes, statistics: dict[str, Any]) -> None:
        from quarl_bench.zoo.foreign import OnnxLayers

        super().__init__()
        self.graph = graph
        self.layers = OnnxLayers(graph)
        self.register_buffer("obs_mean", torch.as_tensor(statistics["mean"], dtype=torch.float32))
        self.register_buffer("obs_std", torch.as_tensor(statistics["std"], dtype=torch.float32))
        self._session: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_session": None}  # a copy (a quantized one) builds its own session

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        if self._session is None:
            import onnxruntime as ort

            from quarl_bench.zoo.foreign import graph_with_weights

            options = ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            graph = graph_with_weights(self.graph, self.layers.initializers())
            self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        *loop, observation = inputs
        obs = ((observation.float() - self.obs_mean) / self.obs_std).detach().cpu().numpy()
        given = dict(zip(("sample", "timestep"), (t.detach().cpu().numpy() for t in loop), strict=False))
        given = {k: (v.astype(np.int64) if k == "timestep" else v.astype(np.float32)) for k, v in given.items()}
        names = {i.name for i in self._session.get_inputs()}
        rows = []
        for row in range(len(obs)):  # one observation per call, as the artifact runs it
            feed = {"obs": obs[row : row + 1]} | {k: v[row : row + 1] for k, v in given.items()}
            rows.append(self._session.run(None, {k: v for k, v in feed.items() if k in names})[0])
        return torch.from_numpy(np.concatenate(rows))


GRAPH_INPUTS = {"chunked": {"obs"}, "denoising": {"sample", "timestep", "obs"}}


def onnx_chunk_policy(graph: bytes, sidecar: Path, observation_space: Any, action_space: Any) -> Any:
    """The chunk policy of a graph and its sidecar.

    :raises QuarlError: for a bad sidecar (:func:`read_sidecar`), or a graph whose inputs are not the shape's.
    """
    import onnx
    from gymnasium import spaces

    from quarl_bench.zoo.chunk_policies import chunked_policy

    features = int(spaces.flatdim(observation_space))
    chunk, statistics = read_sidecar(sidecar, features)
    shape = "denoising" if isinstance(chunk, DenoisingShape) else "chunked"
    model = onnx.load_from_string(graph).graph
    inputs = {i.name for i in model.input} - {init.name for init in model.initializer}
    if "obs" not in inputs or not inputs <= GRAPH_INPUTS[shape]:
        raise QuarlError(
            f"the {shape} graph beside {str(sidecar)!r} has inputs {sorted(inputs)}: expected "
            f"{sorted(GRAPH_INPUTS[shape])} (obs, and a denoiser's sample and int64 timestep)"
        )
    return chunked_policy(observation_space, action_space, OnnxChunkModule(graph, statistics), chunk)


def sidecar_label(graph_path: str) -> str:
    """The chunk shape a graph's sidecar declares, as a certificate names it; '' for a graph without one."""
    path = sidecar_of(graph_path)
    if path is None:
        return ""
    return read_sidecar(path, None)[0].label()
