"""The registry of deployment backends: one :class:`Backend` per name, each registered by one module of
``deploy/targets/`` (imported by name: this registry sits low in the house, since specs validate against it) with every fact about it (the precision it runs at, the artifact kind it builds, the extra and
modules it needs, the fake-quant spec it claims, how it calibrates, whether it needs a torch policy, and its build
function). ``deploy``, ``export``, ``table4``, the parity gate and the store ask this registry, never a name list.
A new backend of an existing artifact kind (ONNX, TorchScript, ``.tflite``, ``.pte``, C) is one module there; a new
kind also needs its runner (``deploy/backends.runner``), timing probe and client text.

Importable without torch: the target modules import their toolchains inside their build functions.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quarl_bench.errors import QuarlError


@dataclass(frozen=True)
class Backend:
    """One deployment backend.

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


_BACKENDS: dict[str, Backend] = {}


def register_backend(entry: Backend) -> Backend:
    """Register ``entry`` under its name (a target module's one call per backend)."""
    _BACKENDS[entry.name] = entry
    return entry


def backend(name: str) -> Backend:
    """The backend ``name``.

    :raises QuarlError: for an unknown name, naming the registered ones.
    """
    if name not in _BACKENDS:
        raise QuarlError(f"unknown backend {name!r}: expected one of {', '.join(_BACKENDS)}")
    return _BACKENDS[name]


def backend_names(**facts: Any) -> tuple[str, ...]:
    """The registered backends whose facts match ``facts`` (``precision="int8"``, ...), in registration order."""
    return tuple(b.name for b in _BACKENDS.values() if all(getattr(b, k) == v for k, v in facts.items()))


def onnx_capable() -> tuple[str, ...]:
    """The backends an ONNX policy played as its own graph can be deployed to: not a calibrated one (its claim
    quantizes activations, which are simulated on torch layers only)."""
    return tuple(b.name for b in _BACKENDS.values() if not b.torch_only and not b.calibrated)


def _load_targets() -> None:
    """Import every module of ``deploy/targets/`` (each registers its backends), the built-in families first."""
    package = "quarl_bench.deploy.targets"
    targets = importlib.import_module(package)
    found = pkgutil.iter_modules(importlib.util.find_spec(package).submodule_search_locations)
    for module in sorted(found, key=lambda m: targets.position(m.name)):
        importlib.import_module(f"{package}.{module.name}")


_load_targets()

BACKENDS = backend_names()
BACKEND_PRECISIONS = {b.name: b.precision for b in _BACKENDS.values()}
BACKEND_NEEDS = {b.name: (b.extra, b.modules) for b in _BACKENDS.values()}
INT8_BACKENDS = backend_names(precision="int8")
W8A8_BACKENDS = backend_names(w8a8_states=True)
