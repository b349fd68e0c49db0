"""Run work: a method config's jobs, the stored ones skipped, the rest produced by the method's handler and stored
one row at a time (``methods/protocol.py``); and a sweep's plan of works.

A :class:`~quarl_bench.jobs.work.Work` is one unit of a command or sweep (some jobs of one agent, one training run);
executors (``run/executors.py``) run many of them, all through the same two functions below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quarl_bench.jobs.grids import EvalSettings, GridCell
from quarl_bench.jobs.work import Work
from quarl_bench.methods.protocol import SideRow, handler
from quarl_bench.store import ResultStore
from quarl_bench.types import AgentRef, EvalResult, Job, QuantSpec

if TYPE_CHECKING:
    from quarl_bench.methods.protocol import OfAgent


def evaluations(work: Work, is_stored: Callable[[str], bool]) -> Iterator[EvalResult | SideRow]:
    """The results of the work's jobs that are not stored (nor left to another work)."""
    method = handler(work.config)
    agent = method.agent(work)
    jobs = [job for job in method.jobs(work, agent) if job.key not in work.skip and not is_stored(job.key)]
    if jobs:
        yield from method.produce(work, agent, jobs)


def run_work(
    work: Work,
    store: ResultStore,
    force: bool = False,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
) -> list[dict[str, Any]]:
    """Produce and store the jobs not yet stored (all with ``force``); return the stored rows in job order (a job
    left to another worker, ``work.skip``, only once it is stored). A method whose rows go to a side table
    (``handler.table``) is stored and read there.

    ``on_result(row, reused)`` is called per job as it is stored or found.
    """
    method = handler(work.config)
    table = method.table

    def has(key: str) -> bool:
        return store.has_in(table, key)

    def stored(key: str) -> dict[str, Any]:
        row = store.get_in(table, key)
        assert row is not None, f"job {key} is not in {store.path} ({table})"
        return row

    agent = method.agent(work)
    jobs = method.jobs(work, agent)
    keys = [job.key for job in jobs if job.key not in work.skip or has(job.key)]  # another worker's: maybe not yet
    reused = {key for key in keys if not force and has(key)}
    for key in reused:
        if on_result:
            on_result(stored(key), True)
    pending = [job for job in jobs if job.key not in reused and job.key not in work.skip]
    for record in method.produce(work, agent, pending) if pending else ():
        key = store_record(store, record, force)
        if on_result:
            on_result(stored(key), False)
    return [stored(key) for key in keys]


def known_jobs(work: Work) -> list[Job]:
    """The work's jobs as far as they are known without running it: a training method's (``found``) only once its
    agent is trained, nothing is trained here."""
    method = handler(work.config)
    finder = getattr(method, "found", None)
    agent = finder(work) if finder else method.agent(work)
    return [] if finder and agent is None else method.jobs(work, agent)


def store_record(store: ResultStore, record: EvalResult | SideRow, force: bool = False) -> str:
    """The one store step of every executor: a result into ``results``, a side row into its table; its key."""
    if isinstance(record, SideRow):
        store.put_side_row(record.table, record.row, replace=force)
        return record.key
    store.put(record, replace=force)
    return record.job.key


@dataclass(frozen=True)
class AgentSources:
    """Where a sweep may take agents from (see :func:`quarl_bench.zoo.resolve.resolve`)."""

    folder: Path | None
    cache: Path
    use_hub: bool = False
    train_if_missing: bool = False
    trust_remote_code: bool = False


@dataclass(frozen=True)
class Skipped:
    algo: str
    env_id: str
    reason: str


def plan(
    cells: list[GridCell],
    sources: AgentSources,
    store: ResultStore,
    workers: int,
    force: bool,
    driver: dict[str, Any],
    random_baseline: bool = False,
) -> tuple[list[Work], list[Skipped], int]:
    """Resolve each (algo, env) once, drop stored jobs, deal the rest over ``workers``; one Work per QAT run.
    ``random_baseline``: each PTQ agent's random-policy job per seed too.

    Returns the work, the combinations skipped with their reason, and how many jobs were already stored.
    """
    from quarl_bench.jobs.grids import Variants, build_jobs

    works: list[Work] = []
    grouped_cells: list[GridCell] = []
    for cell in cells:
        if (config := cell_config(cell, sources)) is not None:
            works.append(Work(config, EvalSettings(cell.episodes, 0), sources.cache, driver=driver))
        else:
            grouped_cells.append(cell)
    agents, skipped = resolve_cells(grouped_cells, sources)
    done = 0
    for ref, group in agents:
        for (seed, episodes, config_type), by_method in _by_settings(group).items():
            settings = EvalSettings(episodes, seed, random_baseline=random_baseline)
            own = by_method.pop(config_type.method, [])
            jobs = build_jobs(ref, own, settings, config_type.method, Variants(others=by_method))
            pending = jobs if force else [job for job in jobs if not store.has(job.key)]
            done += len(jobs) - len(pending)
            keys = {job.key for job in jobs}
            shares = [pending[i :: min(workers, len(pending))] for i in range(min(workers, len(pending)))]
            for share in shares:  # the fp32 reference is evaluated by the first share only
                mine = {job.key for job in share}
                config = config_type.from_jobs(ref, share)
                works.append(Work(config, settings, sources.cache, frozenset(keys - mine), driver))
    return works, skipped, done


def cell_config(cell: GridCell, sources: AgentSources) -> Any:
    """The work config of a grid cell whose method plans one run per cell (its config's ``from_cell``: QAT, a
    method registered by the user; one that evaluates an existing agent gets it from the grid's ``sources``, as
    PTQ cells do); None for a PTQ cell, whose agent's cells are evaluated together.

    :raises QuarlError: for a method that is not registered, or one a grid cannot plan.
    """
    from quarl_bench.errors import QuarlError
    from quarl_bench.methods.protocol import OfAgent, config_type, grouping

    if grouping(cell.method) is not None:  # played with the agent's other cells (PTQ's)
        return None
    kind = config_type(cell.method)
    if issubclass(kind, OfAgent):
        return kind.from_cell(cell, cell_agent(cell, sources, sources.use_hub))
    from_cell = getattr(kind, "from_cell", None)
    if from_cell is None:
        raise QuarlError(
            f"method {cell.method!r} cannot run from a grid: its config {kind.__name__} has no from_cell(cell)"
        )
    return from_cell(cell)


def resolve_cells(
    cells: list[GridCell], sources: AgentSources
) -> tuple[list[tuple[AgentRef, list[GridCell]]], list[Skipped]]:
    """Each agent of some PTQ grid cells resolved once, with its cells; the agents the sources lack, with why."""
    from quarl_bench.errors import QuarlError

    by_agent: dict[tuple[str, str, str, tuple[str, ...]], list[GridCell]] = {}
    for cell in cells:
        by_agent.setdefault((cell.algo, cell.env_id, cell.model, cell.env_packages), []).append(cell)
    agents, skipped = [], []
    for (algo, env_id, model, _), group in by_agent.items():
        try:
            agents.append((cell_agent(group[0], sources, sources.use_hub), group))
        except QuarlError as error:
            skipped.append(Skipped(model or algo, env_id, str(error)))
    return agents, skipped


def cell_agent(cell: GridCell, sources: AgentSources, use_hub: bool) -> AgentRef:
    """The agent of a PTQ grid cell (its policy file, or the zoo agent the sources have), by the one resolver.

    :raises QuarlError: when there is none.
    """
    from quarl_bench.zoo.resolve import AgentQuery, resolve

    query = AgentQuery(
        cell.env_id,
        None if cell.model else cell.algo,
        cell.model or None,
        env_packages=cell.env_packages,
        folder=str(sources.folder) if sources.folder else None,
        cache=str(sources.cache),
        use_hub=use_hub,
        train_if_missing=sources.train_if_missing,
        trust_remote_code=sources.trust_remote_code,
    )
    return resolve(query)


def _by_settings(cells: list[GridCell]) -> dict[tuple[int, int, type[OfAgent]], dict[str, list[QuantSpec]]]:
    """Grouped cells by (seed, episodes, the config that groups them): their specs by method."""
    from quarl_bench.methods.protocol import grouping

    groups: dict[tuple[int, int, type[OfAgent]], dict[str, list[QuantSpec]]] = {}
    for cell in cells:
        config = grouping(cell.method)
        assert config is not None  # only grouped cells come here (cell_config)
        key = (cell.seed, cell.episodes, config)
        groups.setdefault(key, {}).setdefault(cell.method, []).append(cell.spec)
    return groups
