"""One protocol for every method that produces stored rows: a config class per method, and a handler registered
for it (torchao's ``quantize_(model, config)`` pattern).

A handler says which agent its jobs evaluate (found, or trained first; None when the run makes its own), which
jobs a work holds (their keys are the store's: "already done?" is one lookup each), and produces the results of
the jobs the store lacks. The runner (``runner.run_work``) and every executor drive works through this protocol
only, so a new method is one module: its config, its handler, and ``@register(ItsConfig)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from quarl_bench.errors import QuarlError
from quarl_bench.jobs.spec_options import check_spec_options
from quarl_bench.registry import METHODS

if TYPE_CHECKING:
    from quarl_bench.jobs.work import Work
    from quarl_bench.types import AgentRef, EvalResult, Job


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

    :attr ray: where a Ray task may run its works: ``any node`` (the default), ``this machine`` (a method that
        trains into the driver's agent cache: a local Ray cluster shares its disk, a remote node would not), or
        ``none`` (a method that starts its own Ray cluster: ActorQ).
    :attr table: where its rows go: ``results`` (``produce`` yields :class:`EvalResult`), or a side table
        (``produce`` yields :class:`SideRow`; its jobs are anything with the row's ``key``). Optional, default
        ``results``.
    """

    ray: str
    table: str

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
    """The base of configs whose works evaluate one existing agent: ``ref``, and its algo and env id.

    :cvar spec_flags: what its specs take beyond their precision (``quarl-bench method NAME`` offers those flags
        only): ``grid`` (granularity, symmetric, bias, layer mode) and ``recipe`` (activations, observations, groups,
        rounding, pruning, calibration: what quantize-and-play applies). None by default: a method's evaluator
        that ignored them would play something else than its flags said.
    """

    ref: AgentRef
    method: ClassVar[str] = ""  # the method's name, which its registration makes known
    spec_flags: ClassVar[tuple[str, ...]] = ()
    # the methods whose grid cells of one agent this config plays together: one work per agent, seed and episode
    # count, split over workers around one fp32 reference (PTQ: ptq and mixed); none: one run per cell
    groups_cells: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_jobs(cls, ref: AgentRef, jobs: list[Job]) -> Any:
        """A share of a grouped work's jobs as this config (for a config with ``groups_cells``)."""
        raise NotImplementedError(f"{cls.__name__} groups no cells")

    @property
    def algo(self) -> str:
        return self.ref.algo

    @property
    def env_id(self) -> str:
        return self.ref.env_id

    @classmethod
    def from_cell(cls, cell: Any, agent: AgentRef) -> Any:
        """A grid cell's work: ``agent`` (found by the grid's agent sources) at the cell's spec, for a config with
        ``specs``; another config says how with a ``from_cell`` of its own.

        :raises QuarlError: for a config without ``specs``.
        """
        if "specs" not in {field.name for field in fields(cls)}:
            raise QuarlError(
                f"method {cell.method!r} cannot run from a grid: its config {cls.__name__} has no specs and no "
                "from_cell(cell, agent)"
            )
        check_spec_options(cell.method, cls.spec_flags, cell.spec)
        with_specs: Any = cls  # a subclass with a ``specs`` field (checked above)
        return with_specs(ref=agent, specs=(cell.spec,))


_HANDLERS: dict[type, Handler] = {}
ANY_NODE, THIS_MACHINE, NO_RAY = "any node", "this machine", "none"  # a handler's ``ray``
HANDLER_DEFAULTS = {"ray": ANY_NODE, "table": "results"}


def refuse_on_ray(method: str, placement: str, local_cluster: bool) -> None:
    """:raises QuarlError: where a method's works cannot run on the Ray cluster asked for, in one line."""
    if placement == NO_RAY:
        raise QuarlError(f"{method} runs start their own Ray cluster: drop --executor ray")
    if placement == THIS_MACHINE and not local_cluster:
        raise QuarlError(
            f"{method} works train into this machine's agent cache: run them on a local Ray cluster (no --address) "
            "or drop --executor ray"
        )


_EVALUATORS: dict[str, Callable[..., EvalResult]] = {}  # spec method -> how one job of it is evaluated


def register(config_type: type, named: bool = True) -> Callable[[type], type]:
    """Class decorator: the decorated handler class serves works whose config is a ``config_type``; with
    ``named``, the config's ``method`` name is known from now on (specs, jobs and grids accept it) and names this
    config type (a second config of the same name, such as a driver's :class:`~quarl_bench.methods.ptq.PlannedJobs`,
    passes ``named=False``)."""

    def decorate(handler_class: type) -> type:
        instance = handler_class()
        for name, default in HANDLER_DEFAULTS.items():  # what a handler need not say
            if not hasattr(instance, name):
                setattr(instance, name, default)
        _HANDLERS[config_type] = instance
        method = getattr(config_type, "method", None)
        if named and method:  # a name another module registered is refused, naming both
            METHODS.add(method, config_type)
        return handler_class

    return decorate


def register_evaluator(method: str) -> Callable[[Callable[..., EvalResult]], Callable[..., EvalResult]]:
    """Function decorator: ``(agent, job, driver, eval_workers) -> EvalResult`` evaluates the jobs whose spec
    method is ``method`` (methods that register none are evaluated as PTQ: quantize and play)."""

    def decorate(function: Callable[..., EvalResult]) -> Callable[..., EvalResult]:
        known = _EVALUATORS.get(method)
        if known is not None and known.__module__ != function.__module__:
            raise QuarlError(
                f"evaluator of method {method!r} registered twice: by {known.__module__} and by {function.__module__}"
            )
        _EVALUATORS[method] = function
        return function

    return decorate


def evaluator(method: str) -> Callable[..., EvalResult]:
    """How one job of spec method ``method`` is evaluated on a loaded agent (its registered evaluator, else PTQ's).

    :raises QuarlError: for a method no module registers (a job names any method; it is checked here, where run).
    """
    if method not in METHODS:
        raise QuarlError(f"bad method {method!r}: expected one of {', '.join(METHODS.names())}")
    if method not in _EVALUATORS:
        METHODS.load(method)
    if method in _EVALUATORS:
        return _EVALUATORS[method]
    METHODS.load("ptq")
    return _EVALUATORS["ptq"]


def evaluated_methods() -> tuple[str, ...]:
    """The methods with an evaluator of their own (what ``certify --method`` takes), every method module loaded."""
    METHODS.load(every=True)
    return tuple(_EVALUATORS)


def grouping(method: str) -> type[OfAgent] | None:
    """The config that plays ``method``'s grid cells of one agent together (its ``groups_cells`` names it), or None
    when each cell is a run of its own."""
    METHODS.load(method)
    for config in list(METHODS.entries.values()):
        if issubclass(config, OfAgent) and method in config.groups_cells:
            return config
    return None


def config_type(method: str) -> type:
    """The config type registered under a method name.

    :raises QuarlError: naming the method and the registered ones.
    """
    return METHODS.get(method)


def handler(config: Any) -> Handler:
    """The registered handler of a config (or of a config type).

    :raises QuarlError: naming the config type and the registered ones.
    """
    kind = config if isinstance(config, type) else type(config)
    if kind not in _HANDLERS:
        METHODS.load(getattr(kind, "method", ""))
    if kind not in _HANDLERS:
        raise QuarlError(
            f"no method handles a {kind.__name__}: expected the config of a registered method, one of "
            f"{', '.join(METHODS.names())}"
        )
    return _HANDLERS[kind]
