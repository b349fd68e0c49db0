"""One protocol for every method that produces stored rows: a config class per method, and a handler registered
for it (torchao's ``quantize_(model, config)`` pattern).

A handler says which agent its jobs evaluate (found, or trained first; None when the run makes its own), which
jobs a work holds (their keys are the store's: "already done?" is one lookup each), and produces the results of
the jobs the store lacks. The runner (``runner.run_work``) and every executor drive works through this protocol
only, so a new method is one module: its config, its handler, and ``@register(ItsConfig)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from quarl_bench import types
from quarl_bench.errors import QuarlError

if TYPE_CHECKING:
    from quarl_bench.types import AgentRef, EvalResult, Job
    from quarl_bench.work import Work


@dataclass(frozen=True)
class SideRow:
    """A row a method stores in a side table (``fidelity``, ``verdicts``) rather than as a result; ``key`` in it."""

    table: str
    row: dict[str, Any]

    @property
    def key(self) -> str:
        return self.row["key"]


class Handler(Protocol):
    """What the runner asks of a method (one instance per registered config type).

    :attr remote: whether a Ray task may run its works (training methods keep their cache on the local disk).
    :attr table: where its rows go: ``results`` (``produce`` yields :class:`EvalResult`), or a side table
        (``produce`` yields :class:`SideRow`; its jobs are anything with the row's ``key``). Optional, default
        ``results``.
    """

    remote: bool

    def agent(self, work: Work) -> AgentRef | None:
        """The agent the work's jobs evaluate: given, found in the cache, or trained now; None when the run makes
        its own agent (quantized rollouts, ActorQ)."""
        ...

    def jobs(self, work: Work, agent: AgentRef | None) -> list[Job]:
        """Every job of the work, in order."""
        ...

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[Job]) -> Iterator[EvalResult | SideRow]:
        """The results of ``jobs`` (those the store lacks), one at a time, for the caller to store."""
        ...


@dataclass(frozen=True)
class OfAgent:
    """The base of configs whose works evaluate one existing agent: ``ref``, and its algo and env id."""

    ref: AgentRef

    @property
    def algo(self) -> str:
        return self.ref.algo

    @property
    def env_id(self) -> str:
        return self.ref.env_id


_HANDLERS: dict[type, Handler] = {}
# Config type name -> the module that registers its handler, imported when a work of that type first runs (torch,
# rl-zoo3 and Ray stay unimported until then). A new method adds its line here or is imported before it runs.
HANDLER_MODULES = {
    "PTQConfig": "quarl_bench.methods.ptq",
    "DeployConfig": "quarl_bench.methods.deploy",
    "QATConfig": "quarl_bench.methods.qat",
    "AmpConfig": "quarl_bench.methods.amp",
    "RolloutConfig": "quarl_bench.methods.rollout",
    "ActorQConfig": "quarl_bench.methods.actorq",
    "FidelityConfig": "quarl_bench.methods.fidelity",
    "PlannedJobs": "quarl_bench.methods.ptq",
    "HardenConfig": "quarl_bench.methods.harden",
}


def register(config_type: type) -> Callable[[type], type]:
    """Class decorator: the decorated handler class serves works whose config is a ``config_type``."""

    def decorate(handler_class: type) -> type:
        _HANDLERS[config_type] = handler_class()
        method = getattr(config_type, "method", None)
        if method and method not in types.METHODS:  # a new method's jobs carry its name in their specs
            types.METHODS = (*types.METHODS, method)
        return handler_class

    return decorate


def handler(config: Any) -> Handler:
    """The registered handler of a config.

    :raises QuarlError: naming the config type and the registered ones.
    """
    kind = type(config)
    if kind not in _HANDLERS and kind.__name__ in HANDLER_MODULES:
        importlib.import_module(HANDLER_MODULES[kind.__name__])
    if kind not in _HANDLERS:
        known = ", ".join(sorted({t.__name__ for t in _HANDLERS} | set(HANDLER_MODULES)))
        raise QuarlError(f"no method handles a {kind.__name__}: expected one of {known}")
    return _HANDLERS[kind]
