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
from collections.abc import Iterable, Mapping
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
