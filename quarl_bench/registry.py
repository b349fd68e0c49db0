"""Every name a user picks, by one mechanism: a :class:`Registry` per kind of thing (precisions, methods, PTQ
rounding algorithms, deployment backends and their artifact kinds, RL algorithms), each entry registered by the
module that implements it.

A registry imports its implementations by name when a name is first asked for: the modules of one package (each
rounding algorithm, each family of backends registers itself) or one module per name (a method's module, imported
when that method is first named or run). So names are listed without importing torch, and ``quarl-bench --help``
stays fast. An unknown name is refused in one line naming the accepted ones.

Each registry lives beside its implementations: backends and artifact kinds in ``deploy/targets/`` (one module per
runtime registers both), rounding algorithms in ``rounding/`` (below the value types, whose job keys hold their
settings), precisions in ``precision.py``, algorithms in ``zoo/algorithms.py``, policy families in ``families/``.
This module keeps the mechanism and the methods' index, which the grid loader and the report (below ``methods/``)
ask. Values carry the other facts they need (a :class:`~quarl_bench.types.DeployTarget` its backend's precision),
filled where a name enters: parsers, the grid loader, the api.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from quarl_bench.errors import QuarlError

if TYPE_CHECKING:
    from types import FrameType

T = TypeVar("T")

PLUGIN_GROUP = "quarl_bench.plugins"  # entry points of outside packages: ``name = "package.module"`` (or ``:function``)
_plugins_loaded = False
# quarl-bench's functions that register on a caller's behalf: a registration's source is the first frame outside them
_REGISTERING = {
    "add",
    "register",
    "decorate",
    "register_backend",
    "register_kind",
    "register_rounding",
    "register_family",
    "register_perturbation",
}


def load_plugins() -> None:
    """Import every installed package's ``quarl_bench.plugins`` entry point, once (as pytest and lm-eval find theirs):
    importing it registers its entries; an entry point naming a function is then called with no arguments.

    :raises QuarlError: for a plugin that fails to load, naming it and its distribution.
    """
    global _plugins_loaded
    if _plugins_loaded or _importing_quarl_bench():
        return  # mid-import (a module-level lookup): a plugin importing that module would find it half made
    _plugins_loaded = True  # before importing: a plugin's own registrations look names up
    from importlib.metadata import entry_points

    for point in entry_points(group=PLUGIN_GROUP):
        where = f"plugin {point.name!r} ({point.value}, from {point.dist.name if point.dist else 'an unknown package'})"
        try:
            loaded = point.load()
        except QuarlError as error:
            raise QuarlError(f"{where}: {error}") from error
        except Exception as error:  # noqa: BLE001 - any failure of outside code is named, in one line
            raise QuarlError(f"{where} failed to load: {type(error).__name__}: {error}") from error
        if callable(loaded) and not isinstance(loaded, type):
            loaded()


def _importing_quarl_bench() -> bool:
    """Whether a quarl_bench module is being imported right now (its top level running)."""
    return any(
        getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
        if name == "quarl_bench" or name.startswith("quarl_bench.")
    )


def _registering_module() -> str:
    """The module a registration comes from: the first caller outside quarl-bench's registering helpers (a plugin's
    own function named ``register`` is its source)."""

    def helper(frame: Any) -> bool:
        module = str(frame.f_globals.get("__name__", ""))
        return module == __name__ or (module.startswith("quarl_bench.") and frame.f_code.co_name in _REGISTERING)

    frame: FrameType | None = sys._getframe(1)
    while frame is not None and helper(frame):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", "?")) if frame is not None else "?"


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
        self.sources: dict[str, str] = {}  # name -> the module that registered it
        self._package, self._first = package, tuple(first)
        self._modules = dict(modules or {})
        self._scanned = not package

    def add(self, name: str, entry: T, source: str | None = None) -> T:
        """Register ``entry`` under ``name``, from ``source`` (default: the calling module).

        :raises QuarlError: for a name another module registered already, naming both (the same module registering
            it again, as a reload does, replaces its entry).
        """
        source = source or _registering_module()
        if name in self.entries and self.sources.get(name, source) != source:
            raise QuarlError(
                f"{self.what} {name!r} registered twice: by {self.sources[name]} and by {source}; rename one of them"
            )
        self.entries[name] = entry
        self.sources[name] = source
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
            load_plugins()
            return tuple(dict.fromkeys([*self._modules, *self._built_in_first()]))
        self.load(every=True)
        return tuple(
            n for n in self._built_in_first() if all(getattr(self.entries[n], k) == v for k, v in facts.items())
        )

    def _built_in_first(self) -> list[str]:
        """The registered names, quarl-bench's own first (a plugin may load before a package's scan)."""
        outside = [name for name in self.entries if not self.sources.get(name, __name__).startswith("quarl_bench")]
        return [name for name in self.entries if name not in outside] + outside

    def indexed(self) -> tuple[str, ...]:
        """The names listed without importing anything (the built-in ones), whatever is registered since."""
        return tuple(self._modules) or self.names()

    def __contains__(self, name: object) -> bool:
        if name in self.entries or name in self._modules:
            return True
        self._scan()  # a module of the package, or a plugin, may register it
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
        """Import the package's modules (once), then the installed plugins (once per process): built-in names first."""
        if not self._scanned:
            self._scanned = True
            package = importlib.util.find_spec(self._package)
            assert package is not None, self._package  # quarl-bench's own package
            found = pkgutil.iter_modules(package.submodule_search_locations)
            order = {module: i for i, module in enumerate(self._first)}
            for module in sorted(found, key=lambda m: (order.get(m.name, len(order)), m.name)):
                importlib.import_module(f"{self._package}.{module.name}")
        load_plugins()


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


# a method's fp32 reference where it is not its own job at fp32 (a ``Job -> Job``), registered by its module
# (deploy, mixed, rollout); ``Job.reference`` asks :func:`reference_rule`
REFERENCE_RULES: dict[str, Callable[[Any], Any]] = {}


def reference_rule(method: str) -> Callable[[Any], Any]:
    """``method``'s reference rule: its module's (imported through the methods' index: never missed), else none."""
    if method not in REFERENCE_RULES and method in METHODS.indexed():
        METHODS.load(method)
    return REFERENCE_RULES.get(method, lambda job: job)
