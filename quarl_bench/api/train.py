"""Methods that train: QAT, mixed-precision training, ActorQ runs and fp32 baselines."""

from __future__ import annotations

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
) -> list[dict[str, Any]]:
    """Run each ActorQ config (``actorq.config.ActorQConfig``) on Ray and store its row; of several configs, a
    finished run already stored is skipped. ``on_start(number, config, skipped)`` before each run,
    ``on_eval(point, cluster)`` after each evaluation of the learner, ``on_row(row)`` after each finished run. Ray's own logging goes beside the store.

    :raises QuarlError: when a run's learner fails (the evaluations it made are stored first).
    """
    from quarl_bench.actorq.driver import already_stored, job_for
    from quarl_bench.jobs.ray_cluster import ray_log_path
    from quarl_bench.jobs.work import Work
    from quarl_bench.run.runner import run_work
    from quarl_bench.store import ResultStore
    from quarl_bench.store.provenance import driver_provenance
    from quarl_bench.zoo.devices import training_device

    for config in configs:  # a bad algo/env pair or learner device fails before any run starts
        config.env_spaces()
        training_device(config.learner_device, "learner device")
    rows = []
    for number, config in enumerate(configs, 1):
        with ResultStore(store_path) as store:
            skipped = len(configs) > 1 and already_stored(config, store)
            if on_start:
                on_start(number, config, skipped)
            if skipped:
                rows.append(store.stored(job_for(config).key))
                continue
            work = Work(
                config,
                driver=driver_provenance(),
                address=address,
                log_path=ray_log_path(Path(store_path)),
                progress=on_eval,
            )
            rows += run_work(work, store, force=True)
            if on_row:
                on_row(rows[-1])
    return rows


def train_agent(algo: str, env: str, cache: Path | None = None, seed: int = 0, n_timesteps: int | None = None) -> Any:
    """Train an fp32 baseline with rl-zoo3's hyperparameters into the cache; the trained agent."""
    from quarl_bench.zoo.agents import DEFAULT_CACHE, find_in_folder
    from quarl_bench.zoo.envs import resolve_env_id
    from quarl_bench.zoo.train import train_baseline

    env_id = resolve_env_id(env)
    cache = cache or DEFAULT_CACHE
    train_baseline(algo, env_id, cache, seed, n_timesteps)
    ref: AgentRef | None = find_in_folder(cache, algo, env_id, "trained")
    return ref
