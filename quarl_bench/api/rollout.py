"""Quantized-rollout PPO runs on local processes or Ray."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quarl_bench.store import ResultStore


def run_rollouts(
    configs: Sequence[Any],
    store: ResultStore,
    executor: str = "local",
    workers: int = 1,
    address: str | None = None,
    force: bool = False,
    cache: Path | None = None,
    on_done: Callable[[Any, list[dict[str, Any]] | None, BaseException | None], None] | None = None,
) -> list[dict[str, Any]]:
    """Train and store every quantized-rollout run (``methods.rollout.RolloutConfig``) the store lacks (all with
    ``force``), on local processes or a Ray cluster; the stored rows of all of them, in order."""
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.rollout import job_for
    from quarl_bench.run.executors import make_executor, run_all
    from quarl_bench.store.provenance import driver_provenance
    from quarl_bench.zoo.agents import DEFAULT_CACHE

    store.check()
    driver = driver_provenance()
    pending = [c for c in configs if force or not store.has(job_for(c).key)]
    works = [Work(c, EvalSettings(), cache or DEFAULT_CACHE, driver=driver, retrain=force) for c in pending]
    if works:  # a run not stored is stored whole: a run whose row was deleted trains again only with force
        run_all(make_executor(executor, store, min(workers, len(works)), True, address), works, on_done)
    rows = [store.get(job_for(c).key) for c in configs]
    return [row for row in rows if row is not None]
