"""Resumable parallel sweeps: grid cells -> per-agent tasks -> a process pool -> the store.

Each worker loads its agent once and evaluates its share of that agent's precisions, writing each row
atomically, so a sweep killed at any moment and started again stores every job exactly once.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from quarl_bench.errors import QuarlError
from quarl_bench.qat_runner import QATConfig, run_qat
from quarl_bench.ray_cluster import connect
from quarl_bench.registry import GridCell
from quarl_bench.runner import EvalSettings, build_jobs, run_job, run_jobs
from quarl_bench.store import ResultStore
from quarl_bench.types import AgentRef, EvalResult, Job, QuantSpec
from quarl_bench.zoo.agents import load_agent, resolve_agent


@dataclass(frozen=True)
class AgentSources:
    """Where a sweep may take agents from (see :func:`quarl_bench.zoo.agents.resolve_agent`)."""

    folder: Path | None
    cache: Path
    use_hub: bool = False
    train_if_missing: bool = False


@dataclass(frozen=True)
class Task:
    """Some of one agent's jobs, run by one worker from one loaded copy of the agent."""

    ref: AgentRef
    jobs: tuple[Job, ...]


@dataclass(frozen=True)
class QATTask:
    """One QAT training run and its evaluation (training dominates, so one run is one task)."""

    config: QATConfig
    cache: Path
    settings: EvalSettings

    @property
    def ref(self) -> SimpleNamespace:  # what progress and failure messages print
        return SimpleNamespace(algo=self.config.algo, env_id=self.config.env_id)

    @property
    def jobs(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class Skipped:
    algo: str
    env_id: str
    reason: str


def plan(
    cells: Iterable[GridCell], sources: AgentSources, store: ResultStore, workers: int, force: bool = False
) -> tuple[list[Task | QATTask], list[Skipped], int]:
    """Resolve each (algo, env) once, drop stored jobs, split the rest over ``workers``.

    Returns the tasks, the combinations skipped with their reason, and how many jobs were already stored.
    """
    by_agent: dict[tuple[str, str], list[GridCell]] = {}
    tasks: list[Task | QATTask] = []
    for cell in cells:
        if cell.method == "qat":
            config = QATConfig(cell.algo, cell.env_id, cell.precision, cell.quant_delay, cell.n_timesteps, cell.seed)
            tasks.append(QATTask(config, sources.cache, EvalSettings(cell.episodes, 0)))
        else:
            by_agent.setdefault((cell.algo, cell.env_id), []).append(cell)
    skipped: list[Skipped] = []
    done = 0
    for (algo, env_id), group in by_agent.items():
        try:
            ref = resolve_agent(algo, env_id, sources.folder, sources.cache, sources.use_hub, sources.train_if_missing)
        except QuarlError as error:
            skipped.append(Skipped(algo, env_id, str(error)))
            continue
        jobs = cell_jobs(ref, group)
        pending = jobs if force else [job for job in jobs if not store.has(job.key)]
        done += len(jobs) - len(pending)
        tasks.extend(split(ref, pending, workers))
    return tasks, skipped, done


def cell_jobs(ref: AgentRef, cells: list[GridCell]) -> list[Job]:
    """Jobs for one agent's cells; every (seed, episodes) group starts with its fp32 reference job."""
    jobs: list[Job] = []
    for seed, episodes in dict.fromkeys((c.seed, c.episodes) for c in cells):
        specs = [QuantSpec(c.precision) for c in cells if (c.seed, c.episodes) == (seed, episodes)]
        for job in build_jobs(ref, specs, EvalSettings(episodes, seed)):
            if job not in jobs:
                jobs.append(job)
    return jobs


def split(ref: AgentRef, jobs: list[Job], workers: int) -> list[Task]:
    """Deal one agent's jobs round-robin into at most ``workers`` tasks (fp32 jobs land in the first)."""
    if not jobs:
        return []
    shares = [jobs[i :: min(workers, len(jobs))] for i in range(min(workers, len(jobs)))]
    return [Task(ref, tuple(share)) for share in shares]


def run_task(task: Task | QATTask, store_path: str, force: bool) -> list[dict[str, Any]]:
    """Worker entry point: one agent load, its jobs evaluated and stored one row at a time (QAT: train first)."""
    one_torch_thread_per_worker()
    with ResultStore(store_path) as store:
        if isinstance(task, QATTask):
            return run_qat(task.config, task.cache, store, task.settings)
        return run_jobs(task.ref, task.jobs, store, force=force)


def evaluate_task(task: Task) -> list[EvalResult]:
    """Ray entry point: evaluate a task's jobs and return the results; the driver stores them.

    On a multi-node cluster the agent's folder must be reachable at the same path on every node.
    """
    one_torch_thread_per_worker()
    agent = load_agent(task.ref)
    return [run_job(agent, job) for job in task.jobs]


def run_tasks_on_ray(
    tasks: list[Task | QATTask],
    store: ResultStore,
    address: str | None,
    force: bool = False,
    on_done: Callable[[Task, list[dict[str, Any]] | None, BaseException | None], None] | None = None,
    on_tick: Callable[[], None] | None = None,
) -> None:
    """Fan tasks out over a Ray cluster (a local one when ``address`` is None); only the driver writes the store."""
    import ray

    if any(isinstance(task, QATTask) for task in tasks):
        raise QuarlError("QAT grids run on the local executor: drop --executor ray")
    connect(address)
    remote = ray.remote(num_cpus=1, max_retries=1)(evaluate_task)
    pending = {remote.remote(task): task for task in tasks}
    try:
        while pending:
            finished, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in finished:
                task = pending.pop(ref)
                try:
                    results = ray.get(ref)
                except Exception as error:  # reported per task, the sweep goes on
                    _notify(on_done, task, None, error)
                    continue
                for result in results:
                    store.put(result, replace=force)
                _notify(on_done, task, [store.get(result.job.key) for result in results], None)
            if on_tick:
                on_tick()
    finally:
        ray.shutdown()


def one_torch_thread_per_worker() -> None:
    """Workers already fill the cores; torch's own intra-op threads on top of them made PPO training 10x slower
    here (each worker's threads spin and wait for a core held by the other worker)."""
    torch.set_num_threads(1)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def run_tasks(
    tasks: list[Task | QATTask],
    store_path: Path,
    workers: int,
    force: bool = False,
    on_done: Callable[[Task, list[dict[str, Any]] | None, BaseException | None], None] | None = None,
    on_tick: Callable[[], None] | None = None,
) -> None:
    """Run tasks in a local process pool (``workers`` processes); a failing task does not stop the others.

    ``on_done(task, rows, error)`` is called per finished task, ``on_tick()`` about once a second.
    """
    if workers == 1:
        for task in tasks:
            try:
                rows = run_task(task, str(store_path), force)
            except Exception as error:  # reported per task, the sweep goes on
                _notify(on_done, task, None, error)
            else:
                _notify(on_done, task, rows, None)
            if on_tick:
                on_tick()
        return
    context = multiprocessing.get_context("spawn")  # no fork of a process that already holds torch threads
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        running: dict[Future, Task] = {pool.submit(run_task, task, str(store_path), force): task for task in tasks}
        while running:
            finished, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            if on_tick:
                on_tick()
            for future in finished:
                task = running.pop(future)
                error = future.exception()
                _notify(on_done, task, None if error else future.result(), error)


def _notify(on_done, task: Task, rows, error) -> None:
    if on_done:
        on_done(task, rows, error)


def with_episodes(cells: list[GridCell], episodes: int | None) -> list[GridCell]:
    """Override every cell's episode count (``--episodes`` on the command line)."""
    return cells if episodes is None else [replace(c, episodes=episodes) for c in cells]
