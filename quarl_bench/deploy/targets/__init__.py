"""The deployment backends and the artifact kinds they build: one module per runtime registers both (a new runtime,
or a new kind, is one module here), and :func:`deploy_target` turns a backend's name into the value a job carries."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quarl_bench.errors import QuarlError
from quarl_bench.registry import Registry
from quarl_bench.types import DeployTarget


@dataclass(frozen=True)
class Backend:
    """One deployment backend (``--backend NAME``), registered by one module of ``deploy/targets/``.

    :param name: its ``--backend`` name.
    :param precision: the precision its artifact runs at (``fp32``, ``fp16``, ``int8``).
    :param kind: the artifact it builds: ``onnx``, ``torchscript``, ``torch`` (a state dict run in-process),
        ``tflite``, ``pte`` or ``c``.
    :param extra: the quarl-bench extra that installs what it needs.
    :param modules: the Python modules it needs (a C compiler is checked by the C backends themselves).
    :param build: ``module:function`` building its :class:`~quarl_bench.deploy.backends.Artifact` from
        ``(name, module, sample, calibration, calibration_method, network_states)`` (one function may build several
        backends of a family by their name).
    :param claims: the fake-quant spec its artifact claims to be, as ``QuantSpec`` keyword arguments; None: fp32
        for an fp32 backend, else W8A8 (``deploy/parity.py``).
    :param w8a8_states: it calibrates on the W8A8 fake-quant policy's calibration states (``network_states``).
    :param torch_only: it needs a torch policy (an ONNX policy is refused, naming the backends that take one).
    :param calibrated: it calibrates on observations the fp32 agent visits (``--calibration-states``,
        ``--calibration-method``: part of its jobs' specs).
    :param carries_state: its artifact can take and return a recurrent policy's state (``deploy/recurrent.py``).
    :param fp32_observation: it keeps a vector observation's first layer in fp32, so its claim does too.
    """

    name: str
    precision: str
    kind: str
    extra: str
    modules: tuple[str, ...]
    build: str
    claims: dict[str, Any] | None = None
    w8a8_states: bool = False
    torch_only: bool = False
    calibrated: bool = False
    carries_state: bool = False
    fp32_observation: bool = False

    def builder(self) -> Callable[..., Any]:
        module, _, function = self.build.partition(":")
        return getattr(importlib.import_module(module), function)


TARGETS = __name__  # one module per runtime: its backends and the artifact kind it plays
FIRST_TARGETS = ("torch", "onnxruntime", "torchao", "litert", "executorch", "c")  # the order --backend lists them in
BACKENDS: Registry[Backend] = Registry("backend", package=TARGETS, first=FIRST_TARGETS)


def register_backend(entry: Backend) -> Backend:
    """Register ``entry`` under its name (a target module's one call per backend)."""
    return BACKENDS.add(entry.name, entry)


@dataclass(frozen=True)
class ArtifactKind:
    """What every artifact of one kind shares however it was built (a :class:`Backend`'s ``kind`` names it),
    registered by the ``deploy/targets/`` module of its runtime: a new kind is that module.

    :param name: ``onnx``, ``torchscript``, ``torch`` (a state dict run in quarl-bench's process), ``tflite``,
        ``pte`` or ``c``.
    :param file_name: its file in an artifact folder (its suffix names a temporary copy too).
    :param runner: ``module:function`` of ``(artifact, threads) -> run``, ``run`` mapping a batch of raw
        observations to actions.
    :param runtime: what a client needs to play it, named in the folder's README; "" for a kind only quarl-bench's
        process runs (not standalone).
    :param packages: the distributions whose versions the parity gate's record names.
    :param client: the README client's Python defining ``act(obs)`` (``contract`` is ``policy.json``); "" none.
    :param recurrent_client: the same for an artifact that carries a recurrent policy's state; "" none.
    :param probe: Python that loads ``path`` in a fresh process and defines ``run(x)``, for peak memory; "" none.
    :param probe_file: ``module:function`` of ``(artifact, folder) -> path`` the probe loads; "" writes the data.
    :param checked: its folder carries test vectors and ``check.py``, the parity gate replayed on any machine.
    :param recipe: how its int8 numbers were made, for ``policy.json`` ("" names the backend).
    """

    name: str
    file_name: str
    runner: str
    runtime: str = ""
    packages: tuple[str, ...] = ()
    client: str = ""
    recurrent_client: str = ""
    probe: str = ""
    probe_file: str = ""
    checked: bool = False
    recipe: str = ""

    @property
    def suffix(self) -> str:
        return self.file_name.removeprefix("policy")

    def function(self, name: str) -> Callable[..., Any]:
        """The function its ``runner`` (or ``probe_file``) names."""
        module, _, function = getattr(self, name).partition(":")
        return getattr(importlib.import_module(module), function)


KINDS: Registry[ArtifactKind] = Registry("artifact kind", package=TARGETS, first=FIRST_TARGETS)


def register_kind(entry: ArtifactKind) -> ArtifactKind:
    """Register ``entry`` under its name (a target module's call for the kind its runtime plays)."""
    return KINDS.add(entry.name, entry)


def onnx_capable() -> tuple[str, ...]:
    """The backends an ONNX policy played as its own graph can be deployed to: not a calibrated one (its claim
    quantizes activations, which are simulated on torch layers only)."""
    return tuple(n for n in BACKENDS.names() if not BACKENDS.get(n).torch_only and not BACKENDS.get(n).calibrated)


def deploy_target(backend: str, calibration_states: int = 0, calibration_method: str = "") -> DeployTarget:
    """The artifact backend ``backend`` builds: its registered precision, and the calibration where it calibrates
    (ignored where it does not, as ``--calibration-states`` is for an uncalibrated backend).

    :raises QuarlError: for an unregistered backend, or a calibrated one without states or method, in one line.
    """
    entry = BACKENDS.get(backend)
    if not entry.calibrated:
        return DeployTarget(backend, entry.precision)
    if calibration_states < 1:
        raise QuarlError(f"bad calibration states {calibration_states}: expected an integer >= 1")
    return DeployTarget(backend, entry.precision, calibration_states, calibration_method)


def check_target(target: DeployTarget) -> DeployTarget:
    """``target`` if it says what its backend builds (a value built by hand may not: the api checks it).

    :raises QuarlError: naming the backend and what it builds.
    """
    expected = deploy_target(target.backend, target.calibration_states, target.calibration_method)
    if target != expected:
        raise QuarlError(f"bad deploy target {target}: backend {target.backend} builds {expected}")
    return target
