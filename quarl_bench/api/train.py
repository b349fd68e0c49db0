"""Methods that train: QAT, mixed-precision training, ActorQ runs and fp32 baselines."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quarl_bench.types import AgentRef

if TYPE_CHECKING:
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.store import ResultStore


def run_amp(
    configs: Sequence[Any],
    settings: EvalSettings,
    store: ResultStore,
    cache: Path | None = None,
    on_start: Callable[[Any], None] | None = None,
) -> list[dict[str, Any]]:
    """Train each mixed-precision config (``methods.amp.AmpConfig``; the cache's when it has it), timed per
    update, and evaluate its agent; one stored row per config, in order."""
    from quarl_bench.api.sweep import run_method

    rows = []
    for config in configs:
        if on_start:
            on_start(config)
        rows.append(run_method(config, store, settings, cache)[0])
    return rows


def run_actorq_runs(
    configs: Sequence[Any],
    store_path: Path,
    address: str | None = None,
    on_start: Callable[[int, Any, bool], None] | None = None,
    on_eval: Callable[[dict[str, Any], Any], None] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    concurrent: int = 1,
) -> list[dict[str, Any]]:
    """Run each ActorQ config (``actorq.config.ActorQConfig``) on Ray and store its row; of several configs, a
    finished run already stored is skipped. ``on_start(number, config, skipped)`` before each run,
    ``on_eval(point, cluster)`` after each evaluation of the learner (with ``concurrent`` above 1 the point names
    its run: ``point["run"]``), ``on_row(row)`` after each finished run. Ray's own logging goes beside the store.

    :param concurrent: runs side by side in one Ray cluster (``actorq/plan.py`` says how many the machine holds).
    :raises QuarlError: when a run's learner fails (the evaluations it made are stored first).
    :raises Interrupted: when a signal stopped the runs (each stored what it measured, marked interrupted).
    """
    from quarl_bench.actorq.driver import already_stored, job_for
    from quarl_bench.store import ResultStore
    from quarl_bench.zoo.devices import training_device

    for config in configs:  # a bad algo/env pair or learner device fails before any run starts
        config.env_spaces()
        training_device(config.learner_device, "learner device")
    pending: list[tuple[int, Any]] = []
    found: dict[int, dict[str, Any]] = {}
    for number, config in enumerate(configs, 1):
        with ResultStore(store_path) as store:
            skipped = len(configs) > 1 and already_stored(config, store)
            if skipped:
                found[number] = store.stored(job_for(config).key)
        if on_start and (skipped or concurrent > 1):
            on_start(number, config, skipped)
        if not skipped:
            pending.append((number, config))
    if concurrent > 1 and len(pending) > 1:
        found |= _side_by_side(pending, store_path, address, on_eval, on_row, concurrent)
    else:
        for number, config in pending:
            if on_start:
                on_start(number, config, False)
            found[number] = _one_run(config, store_path, address, on_eval)
            if on_row:
                on_row(found[number])
    return [found[number] for number in sorted(found)]


def _one_run(config: Any, store_path: Path, address: str | None, on_eval: Any) -> dict[str, Any]:
    """One ActorQ run through its method's handler, its row stored (a failed or interrupted run's too)."""
    from quarl_bench.jobs.ray_cluster import ray_log_path
    from quarl_bench.jobs.work import Work
    from quarl_bench.run.runner import run_work
    from quarl_bench.store import ResultStore
    from quarl_bench.store.provenance import driver_provenance

    work = Work(
        config,
        driver=driver_provenance(),
        address=address,
        log_path=ray_log_path(Path(store_path)),
        progress=on_eval,
    )
    with ResultStore(store_path) as store:
        return run_work(work, store, force=True)[-1]


def _side_by_side(
    pending: list[tuple[int, Any]],
    store_path: Path,
    address: str | None,
    on_eval: Any,
    on_row: Any,
    concurrent: int,
) -> dict[int, dict[str, Any]]:
    """The pending runs, ``concurrent`` at a time, in threads sharing one Ray cluster; a signal to this process
    stops them all, each storing what it measured."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from quarl_bench.actorq.driver import STOP, shared_cluster
    from quarl_bench.errors import Interrupted
    from quarl_bench.jobs.ray_cluster import ray_log_path

    def labelled(config: Any) -> Any:
        label = f"{config.actor_precision} seed {config.seed}"
        return (lambda point, cluster: on_eval(point | {"run": label}, cluster)) if on_eval else None

    found: dict[int, dict[str, Any]] = {}
    errors: list[BaseException] = []
    with shared_cluster(address, ray_log_path(Path(store_path))), ThreadPoolExecutor(concurrent) as pool:
        futures = {pool.submit(_one_run, c, store_path, None, labelled(c)): n for n, c in pending}
        try:
            for future in as_completed(futures):
                try:
                    found[futures[future]] = future.result()
                    if on_row:
                        on_row(found[futures[future]])
                except Exception as error:  # one run's failure; the others go on
                    errors.append(error)
        except KeyboardInterrupt:  # this process was signalled: every run stops and stores what it measured
            STOP.set()
            for future in futures:
                with contextlib.suppress(Exception):
                    future.result()
            raise Interrupted(
                "ActorQ runs stopped by a signal: each stored its evaluations so far, marked interrupted"
            ) from None
    if errors:
        raise errors[0]
    return found


def train_agent(
    algo: str,
    env: str,
    cache: Path | None = None,
    seed: int = 0,
    n_timesteps: int | None = None,
    options: Any = None,
) -> Any:
    """Train an fp32 baseline with rl-zoo3's hyperparameters (or ``options``' file and overrides:
    :class:`~quarl_bench.zoo.train.TrainOptions`) into the cache, checkpointing as it goes; the trained agent."""
    from quarl_bench.zoo.agents import DEFAULT_CACHE, find_in_folder
    from quarl_bench.zoo.envs import resolve_env_id
    from quarl_bench.zoo.train import train_baseline

    env_id = resolve_env_id(env)
    cache = cache or DEFAULT_CACHE
    train_baseline(algo, env_id, cache, seed, n_timesteps, options)
    ref: AgentRef | None = find_in_folder(cache, algo, env_id, "trained")
    return ref
