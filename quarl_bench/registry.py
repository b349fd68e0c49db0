"""Every name a user picks, by one mechanism: a :class:`Registry` per kind of thing (precisions, methods, PTQ
rounding algorithms, deployment backends and their artifact kinds, RL algorithms), each entry registered by the
module that implements it.

A registry imports its implementations by name when a name is first asked for: the modules of one package (each
rounding algorithm, each family of backends registers itself) or one module per name (a method's module, imported
when that method is first named or run). So value types validate names against a registry without importing
torch, and ``quarl-bench --help`` stays fast. An unknown name is refused in one line naming the accepted ones.

The registries of this module are those whose implementations live above the value types: rounding algorithms
(``quant/rounding/``), backends and artifact kinds (``deploy/targets/``: one module per runtime registers both) and
methods (``methods/``). Precisions are declared in ``precision.py`` and algorithms in ``zoo/algorithms.py``, as
registries of the same class.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from quarl_bench.errors import QuarlError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names to entries, in registration order.

    :param what: how an error names one (``backend``, ``ptq method``).
    :param package: every module of this package registers entries, imported together (those named in ``first``
        first, the rest by name): on the first lookup, or, beside ``modules``, only when a name is not found there.
    :param modules: name -> the module that registers it, imported when that name is first asked for; such names
        are listed without importing anything.
    """

    def __init__(
        self, what: str, package: str = "", modules: Mapping[str, str] | None = None, first: Iterable[str] = ()
    ) -> None:
        self.what = what
        self.entries: dict[str, T] = {}
        self._package, self._first = package, tuple(first)
        self._modules = dict(modules or {})
        self._scanned = not package

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name`` (a later registration of the same name replaces it)."""
        self.entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        """The entry ``name``.

        :raises QuarlError: for a name that is not registered (never mapped to another), naming those that are.
        """
        self.load(name)
        if name not in self.entries:
            raise QuarlError(f"bad {self.what} {name!r}: expected one of {', '.join(self.names())}")
        return self.entries[name]

    def names(self, **facts: Any) -> tuple[str, ...]:
        """The registered names (those whose entries have these ``facts``, ``precision="int8"``...), in order."""
        if not facts:
            if not self._modules:
                self._scan()
            return tuple(dict.fromkeys([*self._modules, *self.entries]))
        self.load(every=True)
        return tuple(n for n, e in self.entries.items() if all(getattr(e, k) == v for k, v in facts.items()))

    def indexed(self) -> tuple[str, ...]:
        """The names listed without importing anything (the built-in ones), whatever is registered since."""
        return tuple(self._modules) or self.names()

    def __contains__(self, name: object) -> bool:
        if name in self.entries or name in self._modules:
            return True
        self._scan()  # a module of the package may register it
        return name in self.entries

    def load(self, name: str | None = None, every: bool = False) -> None:
        """Import the implementations: the module registering ``name`` (or, with ``every``, every module), unless it
        is registered already; the package's modules where ``name`` is in no index."""
        if every:
            for module in self._modules.values():
                importlib.import_module(module)
            self._scan()
        elif name in self._modules:
            if name not in self.entries:
                importlib.import_module(self._modules[name])
        elif name is None or name not in self.entries:
            self._scan()

    def _scan(self) -> None:
        if self._scanned:
            return
        self._scanned = True
        found = pkgutil.iter_modules(importlib.util.find_spec(self._package).submodule_search_locations)
        order = {module: i for i, module in enumerate(self._first)}
        for module in sorted(found, key=lambda m: (order.get(m.name, len(order)), m.name)):
            importlib.import_module(f"{self._package}.{module.name}")


@dataclass(frozen=True)
class Rounding:
    """One PTQ weight-rounding algorithm (``--ptq NAME``): ``round(weight, inputs, grid, layer_index) -> quantized
    weight`` on a 2-D weight (rows: output channels), its layer inputs as rows, and the RTN grid (step, lowest and
    highest code per element); its settings are part of every job key it makes. Round to nearest has none."""

    name: str
    label: str
    round: Callable[..., Any] | None = None
    settings: dict[str, float] = field(default_factory=dict)


NEAREST = "rtn"  # round to nearest: no calibration, the grid's own rounding
ROUNDINGS: Registry[Rounding] = Registry("ptq method", package="quarl_bench.quant.rounding")
ROUNDINGS.add(NEAREST, Rounding(NEAREST, "RTN"))


def register_rounding(name: str, label: str, settings: dict[str, float]) -> Callable[[Callable], Callable]:
    """Function decorator: the decorated ``(weight, inputs, grid, layer_index)`` is the rounding ``name``."""

    def decorate(function: Callable) -> Callable:
        ROUNDINGS.add(name, Rounding(name, label, function, dict(settings)))
        return function

    return decorate


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


TARGETS = "quarl_bench.deploy.targets"  # one module per runtime: its backends and the artifact kind it plays
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


# Methods: name -> the module that registers its config type (its handler, its job evaluator), imported when the
# method is first named or run (torch, rl-zoo3 and Ray stay unimported until then). A new method is one module of
# ``methods/``, found when its name is first asked for (a line here lists it without importing it: ``--help``);
# ``methods/protocol.register`` adds its config type.
METHODS: Registry[type] = Registry(
    "method",
    package="quarl_bench.methods",  # a method module in no index below is found when its name is first asked for
    modules={
        "ptq": "quarl_bench.methods.ptq",
        "mixed": "quarl_bench.methods.ptq",  # a per-layer allocation (``quarl-bench mixed``), evaluated as PTQ
        "random": "quarl_bench.methods.random_policy",  # the uniform-random policy: the 0 of normalised scores
        "deploy": "quarl_bench.methods.deploy",
        "qat": "quarl_bench.methods.qat",
        "amp": "quarl_bench.methods.amp",
        "rollout": "quarl_bench.methods.rollout",
        "actorq": "quarl_bench.methods.actorq",
        "fidelity": "quarl_bench.methods.fidelity",
        "harden": "quarl_bench.methods.harden",
    },
)
# Spec methods evaluated as PTQ of an existing agent: a grid's cells of these are grouped by agent (one work per agent
# and worker), every other method's cell is a run of its own (its config's ``from_cell``).
PTQ_METHODS = ("ptq", "mixed")
