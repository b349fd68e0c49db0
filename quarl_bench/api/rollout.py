"""Quantized-rollout PPO runs on local processes or Ray."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def run_rollouts(
    configs: Sequence[Any],
    store: Any,
    executor: str = "local",
    workers: int = 1,
    address: str | None = None,
    force: bool = False,
    cache: Path | None = None,
    on_done: Callable[[Any, list[dict[str, Any]] | None, BaseException | None], None] | None = None,
) -> list[dict[str, Any]]:
    """Train and store every quantized-rollout run (``methods.rollout.RolloutConfig``) the store lacks (all with
    ``force``), on local processes or a Ray cluster; the stored rows of all of them, in order."""
    from quarl_bench.executors import make_executor, run_all
    from quarl_bench.methods.rollout import RolloutWork, job_for, rollout_remotely, run_rollout_in_worker
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.zoo.agents import DEFAULT_CACHE

    store.check()
    driver = driver_provenance()
    pending = [c for c in configs if force or not store.has(job_for(c).key)]
    works = [RolloutWork(c, cache or DEFAULT_CACHE, driver, force) for c in pending]
    if works:
        # Ray tasks return rows the driver stores, so its force is always on; local workers store their own
        runner = make_executor(
            executor,
            store,
            min(workers, len(works)),
            force or executor == "ray",
            address,
            local_entry=run_rollout_in_worker,
            remote_entry=rollout_remotely,
        )
        run_all(runner, works, on_done)
    rows = [store.get(job_for(c).key) for c in configs]
    return [row for row in rows if row is not None]
