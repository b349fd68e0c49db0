"""YAML grids: plan a sweep's works, run them on an executor (resuming where a sweep stopped), and the agents of a
grid for commands that take ``--grid``."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quarl_bench.errors import QuarlError, note
from quarl_bench.extras import require

if TYPE_CHECKING:
    from quarl_bench.jobs.work import Work
    from quarl_bench.store import ResultStore


@dataclass
class SweepPlan:
    """What a sweep will do: its grid cells, the works still to run, and what it skips."""

    study: str
    cells: list[Any]
    works: list[Any]
    skipped: list[Any]
    already_stored: int
    workers: int

    @property
    def training_runs(self) -> int:
        from quarl_bench.methods.protocol import grouping

        return sum(grouping(work.method) is None for work in self.works)  # a grouped work trains nothing


@dataclass
class SweepOutcome:
    plan: SweepPlan
    failures: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def agent_sources(
    folder: Path | None,
    cache: Path | None,
    use_hub: bool,
    train_if_missing: bool = False,
    trust_remote_code: bool = False,
) -> Any:
    """Where a grid's agents come from: ``folder`` (else ``$QUARL_ZOO``), the cache, the hub, training."""
    from quarl_bench.run.runner import AgentSources
    from quarl_bench.zoo.agents import DEFAULT_CACHE, ZOO_ENV

    folder = folder or (Path(os.environ[ZOO_ENV]) if os.environ.get(ZOO_ENV) else None)
    return AgentSources(folder, cache or DEFAULT_CACHE, use_hub, train_if_missing, trust_remote_code)


def plan_sweep(
    grid: str | Path,
    sources: Any,
    store: ResultStore,
    algos: Sequence[str] | None = None,
    envs: Sequence[str] | None = None,
    bits: Sequence[str] | None = None,
    episodes: int | None = None,
    eval_seeds: Sequence[int] | None = None,
    executor: str = "local",
    workers: int | None = None,
    force: bool = False,
    random_baseline: bool = False,
    address: str | None = None,
) -> SweepPlan:
    """The works of a grid (filtered) that the store lacks, dealt over ``workers``.

    :raises QuarlError: when no cell matches the filters, or a grid asks for a Ray cluster its method cannot run on
        (a training method on a remote one, ActorQ on any).
    """
    from quarl_bench.jobs.grids import load_study, select
    from quarl_bench.methods.protocol import config_type, grouping, handler, refuse_on_ray
    from quarl_bench.run.executors import default_workers
    from quarl_bench.run.runner import plan
    from quarl_bench.store.provenance import driver_provenance

    study = load_study(grid)
    cells = with_eval_seeds(select(study.cells, algos, envs, bits, episodes), eval_seeds)
    if not cells:
        raise QuarlError(f"no job in {grid} matches the filters: check --algo/--env/--bits")
    if executor == "ray":
        require("distributed", "--executor ray", ("ray",))
        for method in dict.fromkeys(cell.method for cell in cells if grouping(cell.method) is None):
            refuse_on_ray(method, handler(config_type(method)).ray, address is None)
    workers = workers or default_workers()
    works, skipped, already = plan(cells, sources, store, workers, force, driver_provenance(), random_baseline)
    return SweepPlan(study.name, cells, works, skipped, already, workers)


def run_sweep(
    planned: SweepPlan,
    sources: Any,
    store: ResultStore,
    executor: str = "local",
    force: bool = False,
    address: str | None = None,
    on_done: Callable[[Any, list[dict[str, Any]] | None, BaseException | None], None] | None = None,
) -> SweepOutcome:
    """Run a planned sweep's works (each row stored as it is made: an interrupted sweep resumes); the outcome holds
    the failures (the other works went on) and the stored rows of every cell of the grid."""
    from quarl_bench.run.executors import make_executor, run_all

    outcome = SweepOutcome(planned)

    def done(work: Work, rows: list[dict[str, Any]] | None, error: BaseException | None) -> None:
        if error is not None:
            outcome.failures.append(f"{work.algo}/{work.env_id} {work.method}: {error}")
        if on_done:
            on_done(work, rows, error)

    run_all(make_executor(executor, store, planned.workers, force, address), planned.works, done)
    outcome.rows = study_rows(store, planned.cells, sources)
    return outcome


def with_eval_seeds(cells: list[Any], seeds: Sequence[int] | None) -> list[Any]:
    """Every PTQ cell once per evaluation seed in ``seeds`` (none: the grid's seeds); the seeds of cells planned one
    run each (QAT's training seeds) stay."""
    if not seeds:
        return cells
    from quarl_bench.methods.protocol import grouping

    seeded = [replace(cell, seed=seed) if grouping(cell.method) else cell for cell in cells for seed in seeds]
    return list(dict.fromkeys(seeded))


def study_rows(store: ResultStore, cells: list[Any], sources: Any) -> list[dict[str, Any]]:
    """The stored rows of a study's cells, found by their job keys (a cell planned as its own run: its handler's
    jobs, once its agent is found, e.g. QAT's trained agent; nothing is trained here).

    Each PTQ agent is resolved (its files hashed) once, not once per cell.
    """
    from quarl_bench.jobs.grids import EvalSettings, build_jobs
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.protocol import grouping
    from quarl_bench.run.runner import cell_agent, cell_config, known_jobs

    agents: dict[tuple[str, str, str], Any] = {}

    def ptq_agent(cell: Any) -> Any:
        who = (cell.algo, cell.env_id, cell.model)
        if who not in agents:
            try:
                agents[who] = cell_agent(cell, sources, use_hub=False)
            except QuarlError:
                agents[who] = None
        return agents[who]

    rows: dict[str, dict[str, Any]] = {}
    for cell in cells:
        if grouping(cell.method) is None:
            try:
                config = cell_config(cell, sources)
            except QuarlError:  # its agent is not found here: no rows
                continue
            jobs = known_jobs(Work(config, EvalSettings(cell.episodes, 0), sources.cache))
        else:
            ref = ptq_agent(cell)
            settings = EvalSettings(cell.episodes, cell.seed)
            jobs = build_jobs(ref, [cell.spec], settings, cell.method) if ref is not None else []
        for job in jobs:
            row = rows.get(job.key) or store.get(job.key)
            if row is not None:
                rows[job.key] = row
    return list(rows.values())


def grid_agents(grid: str | Path, algo: str | None, env: str | None, sources: Any) -> list[tuple[Any, tuple]]:
    """A grid's PTQ agents (filtered by ``algo``/``env``) with the specs each is evaluated at; agents the sources
    lack are listed on stderr and skipped, as ``sweep`` does."""
    from quarl_bench.jobs.grids import load_study, select
    from quarl_bench.run.runner import resolve_cells
    from quarl_bench.types import DEFAULT_METHOD

    cells = select(load_study(grid).cells, [algo] if algo else None, [env] if env else None)
    cells = [cell for cell in cells if cell.method == DEFAULT_METHOD]  # quantize-and-play cells
    if not cells:
        raise QuarlError(f"no PTQ cell in {grid} matches the filters: check --algo/--env")
    agents, skipped = resolve_cells(cells, sources)
    for missing in skipped:
        note(f"skipped {missing.algo}/{missing.env_id}: {missing.reason}")
    return [(ref, tuple(dict.fromkeys(cell.spec for cell in group))) for ref, group in agents]


def run_method(
    config: Any,
    store: ResultStore,
    settings: Any = None,
    cache: Path | None = None,
    executor: str = "local",
    address: str | None = None,
    force: bool = False,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
) -> list[dict[str, Any]]:
    """Run one registered method's ``config`` (any method: its handler says which agent and jobs) and return its
    stored rows in job order; stored jobs are reused unless ``force``. On ``executor="ray"`` the work runs as a Ray
    task (where the method allows it) and the driver stores its rows, results and side rows alike.
    ``on_result(row, reused)`` as each job's row is stored or found (locally: as it is made)."""
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.protocol import handler
    from quarl_bench.run.executors import make_executor, run_all
    from quarl_bench.run.runner import known_jobs, run_work
    from quarl_bench.store.provenance import driver_provenance
    from quarl_bench.zoo.agents import DEFAULT_CACHE

    store.check()
    work = Work(config, settings or EvalSettings(), cache or DEFAULT_CACHE, driver=driver_provenance(), address=address)
    if executor == "ray":
        table = handler(config).table  # the jobs stored already (a training method's: once trained) are skipped
        stored = [job.key for job in known_jobs(work) if not force and store.has_in(table, job.key)]
        work = replace(work, skip=frozenset(stored))
        ended: list[BaseException | None] = []
        run_all(make_executor("ray", store, 1, force, address), [work], lambda _w, _r, error: ended.append(error))
        if ended and ended[0] is not None:
            raise ended[0]
        force = False  # stored by the driver just now: read back below
    return run_work(work, store, force, on_result)
