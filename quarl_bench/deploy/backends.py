"""Deployment artifacts: what a backend builds (:class:`Artifact`), how a backend is built by name
(:func:`build`, through the backend registry ``deploy.targets.BACKENDS`` and its modules), how an
artifact runs (:func:`runner`), and the builders several backends share (ONNX Runtime's int8 quantizers, the edge
and C artifacts).

ONNX Runtime's int8 graphs are built in ``deploy/ort_int8.py``, in one format for every CPU.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from quarl_bench.deploy.targets import BACKENDS, KINDS
from quarl_bench.errors import QuarlError
from quarl_bench.precision import precision


@dataclass(frozen=True)
class Artifact:
    """A deployable policy's content: ``kind`` ``onnx`` (ONNX Runtime), ``torchscript``, ``tflite`` (LiteRT),
    ``pte`` (ExecuTorch), ``c`` (``files``: policy.h and policy.c; ``data`` is their concatenation) or ``torch`` (a
    state dict; ``module`` runs it in this process)."""

    backend: str
    kind: str
    data: bytes
    module: Callable[[Any], Any] | None = None  # a state-dict artifact's module, run in this process
    files: tuple[tuple[str, bytes], ...] = ()
    meta: tuple[tuple[str, Any], ...] = ()  # JSON-like facts (normalisation, dimensions, a recurrent state's shape)

    @property
    def sha256(self) -> str:
        """Of every file it is (a chunk artifact's graph, sidecar and runtime; a C artifact's sources)."""
        return hashlib.sha256(b"".join(data for _, data in self.files) if self.files else self.data).hexdigest()

    @property
    def nbytes(self) -> int:
        return len(self.data)

    @property
    def suffix(self) -> str:
        return KINDS.get(self.kind).suffix

    @property
    def standalone(self) -> bool:
        """Loadable by a fresh process without quarl-bench."""
        return bool(KINDS.get(self.kind).runtime)

    def named_files(self) -> dict[str, bytes]:
        """The files an artifact folder holds (besides policy.json and README.md)."""
        return dict(self.files) if self.files else {KINDS.get(self.kind).file_name: self.data}

    def info(self, name: str, default: Any = None) -> Any:
        return dict(self.meta).get(name, default)


def require_backend(name: str) -> None:
    """Raise one line naming the extra (or tool) a backend needs when it is missing here.

    :raises QuarlError: ``backend litert-int8 needs the 'edge' extra (litert_torch is not installed): ...``.
    """
    import importlib.util

    entry = BACKENDS.get(name)
    for module in entry.modules:
        if importlib.util.find_spec(module) is None:
            raise QuarlError(
                f"backend {name} needs the '{entry.extra}' extra ({module} is not installed): "
                f"pip install 'quarl-bench[{entry.extra}]'"
            )
    if entry.kind == "c":
        from quarl_bench.deploy.c_build import compiler

        compiler()


def build(
    name: str,
    module,
    sample: np.ndarray,
    calibration: np.ndarray | None = None,
    calibration_method: str = "minmax",
    network_states: np.ndarray | None = None,
) -> Artifact:
    """The artifact of backend ``name`` for a :class:`~quarl_bench.deploy.export.DeployablePolicy` (or an ONNX
    policy's :class:`~quarl_bench.deploy.export.GraphPolicy`).

    :param sample: one batch of raw observations (shapes and dtype for the export).
    :param calibration: raw observations the fp32 policy visited (``ort-int8-static`` only).
    :param network_states: the W8A8 fake-quant policy's calibration states, as the network sees them (after
        normalisation): backends with ``w8a8_states`` (``litert-int8``, ``executorch-int8``, ``c-int8``) take them.
    :raises QuarlError: in one line, when the backend cannot be built here.
    """
    from quarl_bench.deploy.targets import onnx_capable

    require_backend(name)
    entry = BACKENDS.get(name)
    if entry.torch_only and not module.torch_layers:
        raise QuarlError(
            f"backend {name} needs a torch policy, and this ONNX policy is played as its own graph: "
            f"{module.policy.not_a_chain}; expected one of {', '.join(onnx_capable())} for such a graph"
        )
    refuse = getattr(module, "refuse_backend", None)  # a chunk policy's loop runs beside ONNX graphs only
    if refuse is not None:
        refuse(name)
    if not module.carries_state:
        artifact = entry.builder()(name, module, sample, calibration, calibration_method, network_states)
        packaged = getattr(module, "packaged", None)  # a chunk policy's loop goes beside its graph
        return packaged(artifact) if packaged is not None else artifact
    from quarl_bench.deploy.recurrent import refuse_stateless

    refuse_stateless(name, entry.carries_state)
    artifact = entry.builder()(name, module, sample, calibration, calibration_method, network_states)
    layers, hidden = module.state_shape
    state = {"obs_dim": int(np.prod(sample.shape[1:])), "layers": layers, "hidden": hidden}
    return dataclasses.replace(artifact, meta=(*artifact.meta, ("recurrent", state)))


def build_edge(name: str, module, sample: np.ndarray, _calibration, _method: str, network_states) -> Artifact:
    """The registry's builder of the LiteRT, ExecuTorch and C backends (``deploy/targets/``)."""
    return edge_artifact(name, module, sample, network_states)


def edge_artifact(backend: str, module, sample: np.ndarray, network_states: np.ndarray | None) -> Artifact:
    """A LiteRT, ExecuTorch or C artifact (``backend``), int8 ones calibrated on ``network_states``."""
    from quarl_bench.deploy import edge
    from quarl_bench.deploy.mlp import normalized

    entry = BACKENDS.get(backend)
    int8 = entry.precision == "int8"
    if entry.precision != "fp32" and (network_states is None or not len(network_states)):
        raise QuarlError(f"{backend} needs calibration states: none were given")
    if entry.kind == "c":
        assert network_states is not None  # c-int8 and c-int4 are int8 (checked above)
        return c_artifact(module, network_states, precision(entry.precision).bits)
    meta: tuple[tuple[str, Any], ...] = ()
    if int8 and getattr(module, "normalize", False):
        # Full-integer graphs quantize their input per tensor: the raw observation's features have very different
        # scales (MountainCar: position +-1.2, velocity +-0.07), so VecNormalize's statistics stay outside, as the
        # fake-quant policy quantizes the normalised observation. policy.json carries them for the client.
        meta = (("normalization", normalization(module)),)
        module = copy.copy(module)
        module.normalize = False
        raw: np.ndarray | None = np.asarray(network_states, dtype=np.float32)
    else:
        from quarl_bench.deploy.export import raw_observations

        raw = raw_observations(module, network_states, sample.dtype) if network_states is not None and int8 else None
    sample = sample if not meta else normalized(sample, dict(meta)["normalization"])
    if entry.kind == "tflite":
        first_fp32 = int8 and entry.fp32_observation and not getattr(module, "image", False)
        return Artifact(backend, "tflite", edge.litert(module, sample, raw, first_fp32), meta=meta)
    return Artifact(backend, "pte", edge.executorch(module, sample, raw), meta=meta)


def normalization(module) -> dict[str, object]:
    """VecNormalize's observation statistics as the client applies them: clip((obs - mean) * scale, -clip, clip)."""
    return {"mean": module.obs_mean.tolist(), "scale": module.obs_scale.tolist(), "clip": module.clip_obs}


def c_artifact(module, network_states: np.ndarray, weight_bits: int = 8) -> Artifact:
    """``policy.h`` and ``policy.c`` of an MLP policy (``c-int8``; ``c-int4`` with ``weight_bits`` 4)."""
    from quarl_bench.deploy.c_int8 import quantize_mlp
    from quarl_bench.deploy.mlp import as_mlp

    mlp = as_mlp(module)
    return program_artifact(quantize_mlp(mlp, network_states, weight_bits))


def program_artifact(program, prefix: str = "") -> Artifact:
    """The ``c-int8`` artifact of an integer program, its public symbols named with ``prefix`` (see ``CNames``)."""
    from quarl_bench.deploy.c_source import CNames, header, source

    names = CNames(prefix)
    mlp = program.mlp
    backend = f"c-int{program.weight_bits}"
    text = source(program, names)
    files = (
        ("policy.h", header(program, f"quarl-bench {backend} policy", text, names).encode()),
        ("policy.c", text.encode()),
    )
    meta = (
        ("program", program),
        ("prefix", prefix),
        ("obs_dim", mlp.obs_dim),
        ("action_dim", mlp.action_dim),
        ("discrete", mlp.head in ("argmax", "quantile-argmax")),
        ("weight_bytes", program.weight_bytes),
        ("layers", program.parameters()),
        ("head", mlp.head),
        ("normalized", mlp.normalized),
    )
    return Artifact(backend, "c", b"".join(data for _, data in files), files=files, meta=meta)


def runner(artifact: Artifact, threads: int = 1) -> Callable[[np.ndarray], np.ndarray]:
    """A function from a batch of raw observations to actions, on ``threads`` intra-op threads (a recurrent
    artifact's: a :class:`~quarl_bench.deploy.recurrent.RecurrentRunner`)."""
    if artifact.info("recurrent") is not None:
        from quarl_bench.deploy.recurrent import recurrent_runner

        return recurrent_runner(artifact, threads)
    if artifact.info("chunk") is not None:
        from quarl_bench.deploy.chunk_artifact import ChunkRunner

        return ChunkRunner(artifact, threads)
    return KINDS.get(artifact.kind).function("runner")(artifact, threads)


def edge_runner(artifact: Artifact, threads: int) -> Callable[[np.ndarray], np.ndarray]:
    """A LiteRT or ExecuTorch artifact on its runtime (VecNormalize's statistics applied outside the graph)."""
    from quarl_bench.deploy import edge
    from quarl_bench.deploy.mlp import normalized

    run = (edge.litert_runner if artifact.kind == "tflite" else edge.executorch_runner)(artifact.data, threads)
    statistics = artifact.info("normalization")
    return run if statistics is None else (lambda obs: run(normalized(obs, statistics)))


def c_runner(artifact: Artifact, _threads: int) -> Callable[[np.ndarray], np.ndarray]:
    """The C artifact compiled for this host and called through ctypes."""
    from quarl_bench.deploy.c_build import host_runner

    info = artifact.info
    return host_runner(dict(artifact.files), info("obs_dim"), info("action_dim"), info("discrete"))


def onnx_runner(artifact: Artifact, threads: int) -> Callable[[np.ndarray], np.ndarray]:
    """An ONNX graph on ONNX Runtime's CPU provider."""
    import onnxruntime as ort

    ort.set_default_logger_severity(3)  # errors only: no graph-cleanup notices on the console
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(artifact.data, options, providers=["CPUExecutionProvider"])
    return lambda obs: session.run(None, {"obs": obs})[0]


def torch_runner(artifact: Artifact, _threads: int) -> Callable[[np.ndarray], np.ndarray]:
    """A TorchScript file, or a state-dict artifact's module, in this process."""
    import torch

    module = torch.jit.load(io.BytesIO(artifact.data)).eval() if artifact.kind == "torchscript" else artifact.module
    assert module is not None  # a state-dict artifact keeps its module

    def run(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.as_tensor(obs)).numpy()

    return run


def int8_weight_summary(artifact: Artifact) -> dict[str, int]:
    """How many weight matrices/kernels (initializers of 2+ dimensions) of each dtype, and how many integer / QDQ
    ops, the ONNX graph holds."""
    import onnx

    model = onnx.load_from_string(artifact.data)
    counts: dict[str, int] = {}
    for initializer in model.graph.initializer:
        if len(initializer.dims) < 2:  # biases, scales, zero points
            continue
        name = onnx.TensorProto.DataType.Name(initializer.data_type)
        counts[name] = counts.get(name, 0) + 1
    for node in model.graph.node:
        if node.op_type in (
            "MatMulInteger",
            "ConvInteger",
            "QuantizeLinear",
            "DequantizeLinear",
            "DynamicQuantizeLinear",
        ):
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts
