"""Where work runs: in this process, in a local process pool, or on a Ray cluster, behind one interface.

Every executor is driven by the same progress loop (:func:`run_all`). Local workers write their rows to the store
themselves (each row one transaction); on Ray the driver is the only writer, so the cluster needs no shared disk
for the store (agent folders must still be reachable at the same path on every node).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from quarl_bench.jobs.work import Work
from quarl_bench.methods.protocol import SideRow, handler, refuse_on_ray
from quarl_bench.run.runner import evaluations, run_work, store_record
from quarl_bench.store import ResultStore
from quarl_bench.types import EvalResult
from quarl_bench.zoo.devices import one_torch_thread

Finished = tuple[Work, list[dict[str, Any]] | None, BaseException | None]  # rows, or the error that ended it


class Executor(Protocol):
    def submit(self, work: Work) -> None: ...

    def finished(self, timeout: float) -> Iterator[Finished]:
        """Work that ended since the last call, waiting up to ``timeout`` seconds for some."""
        ...

    def busy(self) -> bool: ...

    def close(self) -> None: ...


def run_all(
    executor: Executor,
    works: list[Work],
    on_done: Callable[[Work, list[dict[str, Any]] | None, BaseException | None], None] | None = None,
    on_tick: Callable[[], None] | None = None,
) -> None:
    """Submit every work, then report each as it ends (a failure does not stop the others); tick about once a second."""
    try:
        for work in works:
            executor.submit(work)
        while executor.busy():
            for work, rows, error in executor.finished(timeout=1.0):
                if on_done:
                    on_done(work, rows, error)
            if on_tick:
                on_tick()
    finally:
        executor.close()


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def show_notes_if(shown: bool) -> None:
    """A worker's initializer: print the library's notes (a long evaluation's heartbeat) where its parent does."""
    from quarl_bench.errors import show_notes

    if shown:
        show_notes()


def run_in_worker(work: Work, store_path: str, force: bool) -> list[dict[str, Any]]:
    """Local worker entry point: one agent load, its jobs evaluated and stored one row at a time."""
    one_torch_thread()
    with ResultStore(store_path) as store:
        return run_work(work, store, force=force)


class InlineExecutor:
    """Runs each work in this process, one after another (``--workers 1``)."""

    def __init__(self, store_path: Path, force: bool = False) -> None:
        self.store_path, self.force = store_path, force
        self.queue: list[Any] = []

    def submit(self, work: Work) -> None:
        self.queue.append(work)

    def busy(self) -> bool:
        return bool(self.queue)

    def finished(self, timeout: float) -> Iterator[Finished]:
        work = self.queue.pop(0)
        try:
            rows = run_in_worker(work, str(self.store_path), self.force)
        except Exception as error:  # reported per work, the sweep goes on
            yield work, None, error
        else:
            yield work, rows, None

    def close(self) -> None:
        self.queue.clear()


class PoolExecutor:
    """A local process pool (spawned: no fork of a process that already holds torch threads)."""

    def __init__(self, store_path: Path, workers: int, force: bool = False) -> None:
        self.store_path, self.force = store_path, force
        from quarl_bench.errors import notes_shown

        self.pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=show_notes_if,
            initargs=(notes_shown(),),
        )
        self.running: dict[Future, Work] = {}

    def submit(self, work: Work) -> None:
        self.running[self.pool.submit(run_in_worker, work, str(self.store_path), self.force)] = work

    def busy(self) -> bool:
        return bool(self.running)

    def finished(self, timeout: float) -> Iterator[Finished]:
        done, _ = wait(self.running, timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            work = self.running.pop(future)
            error = future.exception()
            yield work, None if error else future.result(), error

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


def evaluate_remotely(work: Work, notes_shown: bool) -> list[EvalResult | SideRow]:
    """Ray entry point: produce a work's jobs (those not in ``work.skip``) and return its records (results and side
    rows alike: the driver stores both through :func:`~quarl_bench.run.runner.store_record`); the notes printed
    where the driver prints them (Ray forwards a worker's stderr to the driver)."""
    show_notes_if(notes_shown)
    one_torch_thread()
    return list(evaluations(work, lambda _key: False))


class RayExecutor:
    """A Ray cluster (a local one when ``address`` is None); the driver stores every result."""

    def __init__(self, store: ResultStore, address: str | None, force: bool = False) -> None:
        import ray

        from quarl_bench.jobs.ray_cluster import connect, ray_log_path

        self.store, self.force, self.ray = store, force, ray
        self.local = address is None  # a cluster started on this machine: its workers share the driver's disk
        connect(address, ray_log_path(store.path))
        self.remote = ray.remote(num_cpus=1, max_retries=1)(evaluate_remotely)
        self.pending: dict[Any, Work] = {}

    def submit(self, work: Work) -> None:
        """``work.skip`` already holds every stored job (``runner.plan`` deals only pending ones to works)."""
        refuse_on_ray(work.method, handler(work.config).ray, self.local)
        from quarl_bench.errors import notes_shown

        self.pending[self.remote.remote(work, notes_shown())] = work

    def busy(self) -> bool:
        return bool(self.pending)

    def finished(self, timeout: float) -> Iterator[Finished]:
        ready, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=timeout)
        for ref in ready:
            work = self.pending.pop(ref)
            try:
                results = self.ray.get(ref)
            except Exception as error:  # reported per work, the sweep goes on
                yield work, None, error
                continue
            table = handler(work.config).table
            keys = [store_record(self.store, record, self.force) for record in results]
            rows = [self.store.get_in(table, key) for key in keys]
            yield work, [row for row in rows if row is not None], None  # stored just now: all of them

    def close(self) -> None:
        self.ray.shutdown()


def make_executor(
    kind: str, store: ResultStore, workers: int, force: bool = False, address: str | None = None
) -> Executor:
    """The one place an executor is chosen: ``ray`` (a cluster at ``address``, or a local one), else this process
    for one worker, else a process pool of ``workers``. Every executor runs :class:`~quarl_bench.run.runner.Work`
    through its method's handler (``methods/protocol.py``)."""
    if kind == "ray":
        return RayExecutor(store, address, force)
    if workers == 1:
        return InlineExecutor(store.path, force)
    return PoolExecutor(store.path, workers, force)
