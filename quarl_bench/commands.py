"""One function per ``quarl-bench`` command: build the work, run it, print through ``report.console``.

Imported only after the arguments parsed, so ``quarl-bench --help`` loads neither torch, gymnasium nor Ray.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from quarl_bench.agent_names import ref_title
from quarl_bench.errors import QuarlError
from quarl_bench.extras import require
from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore

if TYPE_CHECKING:
    from quarl_bench.registry import GridCell


def run(args: argparse.Namespace) -> int:
    from quarl_bench.api import run_ptq
    from quarl_bench.arguments import recipe_options
    from quarl_bench.registry import EvalSettings
    from quarl_bench.report.console import result_line, result_table
    from quarl_bench.types import QuantSpec

    recipe = recipe_options(args)
    specs = tuple(
        QuantSpec(p, args.granularity, args.symmetric, args.quantize_bias, layers=args.layers, **recipe)
        for p in args.bits
    )
    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        settings = EvalSettings(
            args.episodes, args.seed, args.n_envs, tuple(args.eval_seeds or ()), args.obs_noise, args.random_baseline
        )
        rows = run_ptq(
            ref,
            specs,
            settings,
            store,
            args.force,
            args.eval_workers,
            lambda row, reused: console.print(result_line(row, reused)),
        )
        console.print(result_table(rows, ref_title(ref)))
        print_not_quantized(rows)
        console.print(f"Stored in {store.path}")
    return 0


def certify(args: argparse.Namespace) -> int:
    """Certify precisions of one agent (or of every agent of ``--grid``): verdicts, the minimum, stored."""
    import json

    from quarl_bench.api import certify_agent, find_agent
    from quarl_bench.arguments import recipe_options
    from quarl_bench.methods.certify import CertifyConfig
    from quarl_bench.report.console import certification_table, verdict_line
    from quarl_bench.types import QuantSpec

    config = CertifyConfig(
        args.tolerance,
        args.tolerance_abs,
        args.confidence,
        args.batch,
        args.max_episodes,
        args.planned_episodes,
        args.seed,
        args.n_envs,
        args.every_width,
    )  # validated before any agent is found or row stored
    if not args.grid and not args.env:
        raise QuarlError("certify needs --env (one agent) or --grid FILE (every agent of a grid)")
    recipe = recipe_options(args)
    specs = tuple(
        QuantSpec(p, args.granularity, args.symmetric, args.quantize_bias, layers=args.layers, **recipe)
        for p in args.bits
    )
    with ResultStore(args.store or DEFAULT_STORE) as store:
        store.check()
        agents = grid_agents(args) if args.grid else [(None, specs)]
        for ref, agent_specs in agents:
            if ref is None:
                ref = find_agent(agent_query(args)) if args.json else _agent_for(args, store)
            elif not args.json:
                console.print(f"Agent: [bold]{escape(ref_title(ref))}[/]")
            on_verdict = None if args.json else (lambda found: console.print(verdict_line(found)))
            result = certify_agent(ref, agent_specs, config, store, force=args.force, on_verdict=on_verdict)
            if args.json:
                print(json.dumps(result.as_json()))
            else:
                console.print(certification_table(result))
        if not args.json:
            console.print(f"Stored in {store.path}")
    return 0


def grid_agents(args: argparse.Namespace) -> list:
    """``--grid``'s agents (filtered by --algo/--env) with the PTQ specs each is certified at; agents the sources
    lack are listed on stderr and skipped, as ``sweep`` does."""
    import sys

    from quarl_bench.registry import load_study, select
    from quarl_bench.runner import AgentSources, resolve_cells
    from quarl_bench.zoo.agents import DEFAULT_CACHE, ZOO_ENV

    cells = select(load_study(args.grid).cells, [args.algo] if args.algo else None, [args.env] if args.env else None)
    cells = [cell for cell in cells if cell.method == "ptq"]
    if not cells:
        raise QuarlError(f"no PTQ cell in {args.grid} matches the filters: check --algo/--env")
    folder = args.folder or (Path(os.environ[ZOO_ENV]) if os.environ.get(ZOO_ENV) else None)
    sources = AgentSources(
        folder, args.cache or DEFAULT_CACHE, not args.no_hub, args.train_if_missing, args.trust_remote_code
    )
    agents, skipped = resolve_cells(cells, sources)
    for missing in skipped:
        print(f"quarl-bench: skipped {missing.algo}/{missing.env_id}: {missing.reason}", file=sys.stderr)
    return [(ref, tuple(dict.fromkeys(cell.spec for cell in group))) for ref, group in agents]


def sweep(args: argparse.Namespace) -> int:
    from quarl_bench.executors import default_workers, make_executor, run_all
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.registry import load_study, select
    from quarl_bench.report.console import progress_bar, spec_text, summary_table
    from quarl_bench.runner import AgentSources, plan
    from quarl_bench.zoo.agents import DEFAULT_CACHE, ZOO_ENV

    study = load_study(args.grid)
    cells = with_eval_seeds(select(study.cells, args.algo, args.env, args.bits, args.episodes), args.eval_seeds)
    if not cells:
        raise QuarlError(f"no job in {args.grid} matches the filters: check --algo/--env/--bits")
    if args.executor == "ray":
        require("distributed", "--executor ray", ("ray",))
    if args.executor == "ray" and any(cell.method != "ptq" for cell in cells):
        raise QuarlError(f"{cells[0].method} grids run on the local executor: drop --executor ray")
    folder = args.folder or (Path(os.environ[ZOO_ENV]) if os.environ.get(ZOO_ENV) else None)
    sources = AgentSources(folder, args.cache or DEFAULT_CACHE, args.hub, args.train_if_missing, args.trust_remote_code)
    workers = args.workers or default_workers()
    store_path = args.store or DEFAULT_STORE
    with ResultStore(store_path) as store:
        works, skipped, already = plan(
            cells, sources, store, workers, args.force, driver_provenance(), args.random_baseline
        )
        for skip in skipped:
            console.print(f"[yellow]skipped[/] {skip.algo}/{skip.env_id}: {skip.reason}")
        n_training = sum(w.training is not None for w in works)
        console.print(
            f"Study {study.name}: {len(cells)} grid cells, {len(works) - n_training} evaluation batches and "
            f"{n_training} training runs to do, {already} already stored, {len(skipped)} agent(s) skipped; "
            f"{workers} worker(s)"
        )
        failures: list[str] = []
        with progress_bar(len(works)) as update:
            done = {"works": 0}

            def on_done(work, rows, error) -> None:
                done["works"] += 1
                if error is not None:
                    failures.append(f"{work.algo}/{work.env_id} {work.method}: {error}")
                last = rows[-1] if rows else None
                text = (
                    f"last: {last['algo']}/{last['env_id']} {spec_text(last)} {last['mean_reward']:.1f}"
                    if last
                    else None
                )
                update(done["works"], text)

            run_all(make_executor(args.executor, store, workers, args.force, args.address), works, on_done)
        for failure in failures:
            console.print(f"[red]failed[/] {failure}")
        rows = study_rows(store, cells, sources)
    if rows:
        console.print(summary_table(rows, f"{study.name}: results in {store_path}"))
    return 1 if failures else 0


def with_eval_seeds(cells: list[GridCell], seeds: list[int] | None) -> list[GridCell]:
    """Every PTQ cell once per evaluation seed in ``seeds`` (none: the grid's seeds); QAT cells' seeds are
    training seeds and stay."""
    if not seeds:
        return cells
    seeded = [replace(cell, seed=seed) if cell.method != "qat" else cell for cell in cells for seed in seeds]
    return list(dict.fromkeys(seeded))


def study_rows(store: ResultStore, cells: list, sources) -> list[dict[str, Any]]:
    """The stored rows of a study's cells, found by their job keys (QAT: each training seed's agent, if trained).

    Each PTQ agent is resolved (its files hashed) once, not once per cell.
    """
    from quarl_bench.methods.qat import QATConfig
    from quarl_bench.registry import EvalSettings, build_jobs
    from quarl_bench.runner import cell_agent
    from quarl_bench.zoo.agents import find_in_folder

    agents: dict[tuple[str, str, str], Any] = {}

    def ptq_agent(cell: GridCell):
        who = (cell.algo, cell.env_id, cell.model)
        if who not in agents:
            try:
                agents[who] = cell_agent(cell, sources, use_hub=False)
            except QuarlError:
                agents[who] = None
        return agents[who]

    rows: dict[str, dict[str, Any]] = {}
    for cell in cells:
        if cell.method == "qat":
            config = QATConfig(cell.algo, cell.env_id, cell.precision, cell.quant_delay, cell.n_timesteps, cell.seed)
            ref = find_in_folder(config.folder(sources.cache), cell.algo, cell.env_id, "qat")
            settings = EvalSettings(cell.episodes, 0)
        else:
            ref, settings = ptq_agent(cell), EvalSettings(cell.episodes, cell.seed)
        for job in build_jobs(ref, [cell.spec], settings, cell.method) if ref is not None else []:
            row = rows.get(job.key) or store.get(job.key)
            if row is not None:
                rows[job.key] = row
    return list(rows.values())


def qat(args: argparse.Namespace) -> int:
    from quarl_bench.methods.qat import resolve_config
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.registry import EvalSettings
    from quarl_bench.report.console import result_table
    from quarl_bench.runner import Work, run_work
    from quarl_bench.types import QuantSpec
    from quarl_bench.zoo.agents import DEFAULT_CACHE

    config = resolve_config(
        args.algo,
        args.env,
        args.bits,
        quant_delay=args.quant_delay,
        n_timesteps=args.n_timesteps,
        seed=args.seed,
        quantize_activations=args.quantize_activations,
    )
    console.print(f"QAT: {config.algo}/{config.env_id} at {config.precision}, training seed {config.seed}")
    with ResultStore(args.store or DEFAULT_STORE) as store:
        store.check()
        work = Work(
            "qat",
            config.algo,
            config.env_id,
            (QuantSpec(config.precision, method="qat"),),
            EvalSettings(args.episodes, args.eval_seed),
            training=config,
            cache=args.cache or DEFAULT_CACHE,
            driver=driver_provenance(),
        )
        rows = run_work(work, store)
        training = rows[-1]["provenance"]["training"]
        console.print(
            f"trained {training['training_steps']} steps, fake quantization on from step {training['enabled_at_step']}"
            f" (delay {training['quant_delay']}); agent in {rows[-1]['agent_path']}"
        )
        console.print(result_table(rows, f"{config.algo} / {config.env_id} (qat)"))
        console.print(f"Stored in {store.path}")
    return 0


def amp(args: argparse.Namespace) -> int:
    from quarl_bench.devices import training_device
    from quarl_bench.methods.amp import AmpConfig, default_dtype
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.registry import EvalSettings
    from quarl_bench.report.console import amp_console_table
    from quarl_bench.runner import Work, run_work
    from quarl_bench.zoo.agents import DEFAULT_CACHE
    from quarl_bench.zoo.envs import resolve_env_id

    env_id, dtype = resolve_env_id(args.env), args.dtype or default_dtype()
    device = training_device(args.device)
    seeds = list(dict.fromkeys(args.seeds))
    rows = []
    with ResultStore(args.store or DEFAULT_STORE) as store:
        store.check()
        for arch in args.policy_arch:
            for seed in seeds:
                for precision in ("fp32", dtype):
                    config = AmpConfig(args.algo, env_id, arch, precision, args.n_timesteps, seed, device)
                    console.print(f"training {arch} policy in {precision} on {device}, seed {seed} ...")
                    work = Work(
                        "amp",
                        args.algo,
                        env_id,
                        (),
                        EvalSettings(args.episodes, 0),
                        training=config,
                        cache=args.cache or DEFAULT_CACHE,
                        driver=driver_provenance(),
                    )
                    rows.append(run_work(work, store)[0])
    title = f"Mixed-precision training: {args.algo} {env_id}, {args.n_timesteps} steps on {device}, seeds {seeds}"
    console.print(amp_console_table(title, rows))
    return 0


ACTORQ_FLAGS = {  # flag dest -> ActorQConfig field, for the settings a flag can override
    "comm_bits": "comm_bits",
    "n_actors": "n_actors",
    "policy_arch": "policy_arch",
    "pull_period": "pull_period",
    "samples_per_insert": "samples_per_insert",
    "batch_size": "batch_size",
    "learning_starts": "learning_starts",
    "max_actor_steps": "max_actor_steps",
    "target_reward": "target_reward",
    "max_seconds": "max_seconds",
    "eval_every": "eval_every_s",
    "eval_episodes": "eval_episodes",
    "int8_backend": "int8_backend",
    "learner_device": "learner_device",
}


def actorq(args: argparse.Namespace) -> int:
    require("distributed", "ActorQ")
    from quarl_bench.actorq.config import requested_runs
    from quarl_bench.actorq.driver import already_stored, run_actorq, store_run
    from quarl_bench.actorq.metrics import breakdown
    from quarl_bench.ray_cluster import ray_log_path
    from quarl_bench.report.console import breakdown_table

    overrides = {field: getattr(args, flag) for flag, field in ACTORQ_FLAGS.items() if getattr(args, flag) is not None}
    configs = requested_runs(args.grid, overrides, args.algo, args.env, args.actor_precision, args.seeds)
    from quarl_bench.devices import training_device

    for config in configs:
        config.env_spaces()  # a bad algo/env pair or learner device fails before any run starts
        training_device(config.learner_device, "learner device")
    store_path = args.store or DEFAULT_STORE
    for number, config in enumerate(configs, 1):
        prefix = f"[{number}/{len(configs)}] " if len(configs) > 1 else ""
        with ResultStore(store_path) as store:
            if len(configs) > 1 and already_stored(config, store):
                console.print(
                    f"{prefix}{config.algo} {config.env_id} {config.actor_precision}: already in the store, skipped"
                )
                continue
        console.print(
            f"{prefix}ActorQ: {config.algo} {config.env_id}, {config.n_actors} {config.actor_precision} actors, "
            f"policy {list(config.policy_arch)}, comm {config.comm_bits} bits, seed {config.seed}"
        )
        outcome = run_actorq(
            config,
            args.address,
            log_path=ray_log_path(Path(store_path)),
            on_eval=lambda p, _: console.print(
                f"  {p['seconds']:7.1f} s  {p['actor_steps']:>8} actor steps  {p['updates']:>7} updates  reward {p['reward']:.1f}"
            ),
        )
        with ResultStore(store_path) as store:
            if outcome.error:
                if outcome.curve:
                    store_run(config, outcome, store)
                raise QuarlError(
                    f"ActorQ run stopped: {outcome.error}; {len(outcome.curve)} evaluations kept in the store"
                )
            row = store_run(config, outcome, store)
        console.print(breakdown_table(breakdown(outcome.actors)))
        prov = row["provenance"]
        console.print(
            f"{prov['actor_steps']} actor steps in {outcome.wall_seconds:.1f} s ({prov['actor_steps_per_s']:.0f}/s); "
            f"learner {outcome.learner['updates']} updates (samples per insert {outcome.learner['samples_per_insert']:.2f}); "
            f"{outcome.broadcasts} broadcasts of {outcome.broadcast_bytes} bytes; int8 weights on actors: "
            f"{all(a['int8_weights'] for a in outcome.actors)}; actor restarts: {outcome.restarts}; "
            f"final reward {row['mean_reward']:.1f}; stored in {store_path}"
        )
        energy = outcome.energy
        console.print(
            f"energy {energy['kwh'] * 1000:.3f} Wh, {energy['emissions_kg'] * 1000:.3f} g CO2eq ({energy['source']})"
        )
    return 0


def rollout(args: argparse.Namespace) -> int:
    from quarl_bench.api import run_rollouts
    from quarl_bench.executors import default_workers
    from quarl_bench.methods.rollout import job_for, requested_rollouts
    from quarl_bench.report.console import rollout_line, rollout_summary

    overrides = {
        name: value
        for name, value in (
            ("cap", args.cap),
            ("n_timesteps", args.n_timesteps),
            ("backend", args.rollout_backend),
            ("episodes", args.episodes),
        )
        if value is not None
    }
    configs = requested_rollouts(
        args.grid, overrides, args.algo, args.env, args.rollout_precision, args.correction, args.seeds
    )
    if args.executor == "ray":
        require("distributed", "--executor ray", ("ray",))
    if any(config.backend == "onnxruntime" for config in configs):
        require("deploy", "--rollout-backend onnxruntime", ("onnx", "onnxruntime"))
    failures: list[str] = []

    def on_done(work, rows, error) -> None:
        if error is not None:
            failures.append(
                f"{work.config.algo}/{work.config.env_id} {work.config.precision} {work.config.label()} "
                f"seed {work.config.seed}: {error}"
            )
            console.print(f"[red]failed[/] {failures[-1]}")
        for row in rows or []:
            console.print(rollout_line(row))

    with ResultStore(args.store or DEFAULT_STORE) as store:
        stored = 0 if args.force else sum(store.has(job_for(config).key) for config in configs)
        console.print(
            f"Quantized rollouts: {len(configs)} runs (fp32 references included), {stored} already stored; "
            f"executor {args.executor}, {args.workers or default_workers()} worker(s)"
        )
        rows = run_rollouts(
            configs,
            store,
            args.executor,
            args.workers or default_workers(),
            args.address,
            args.force,
            args.cache,
            on_done,
        )
        if rows:
            console.print(rollout_summary(rows))
        console.print(f"Stored in {store.path}")
    return 1 if failures else 0


def existing_store(path: Path | None) -> Path:
    """The store a reading command opens; it must exist (reading never creates one)."""
    path = path or DEFAULT_STORE
    if not Path(path).is_file():
        raise QuarlError(f"no results store at {str(path)!r}: run `quarl-bench run` or `sweep` first, or pass --store")
    return Path(path)


def report(args: argparse.Namespace) -> int:
    from quarl_bench.report.writer import write_report

    with ResultStore(existing_store(args.store)) as store:
        if store.to_dataframe().empty and store.timings().empty:
            raise QuarlError(
                f"the store {str(store.path)!r} holds no rows: nothing to report "
                "(expected a store that run, sweep, deploy, actorq or rollout wrote)"
            )
        for line in write_report(store, args.out, args.paper, args.tolerance, tuple(args.formats)):
            console.print(line)
        if args.html:
            from quarl_bench.report.html import write_html_report

            console.print(f"wrote {write_html_report(store, args.out)}")
    return 0


def train(args: argparse.Namespace) -> int:
    from quarl_bench.zoo.agents import DEFAULT_CACHE, find_in_folder
    from quarl_bench.zoo.envs import resolve_env_id
    from quarl_bench.zoo.train import train_baseline

    env_id = resolve_env_id(args.env)
    cache = args.cache or DEFAULT_CACHE
    train_baseline(args.algo, env_id, cache, args.seed, args.n_timesteps)
    ref = find_in_folder(cache, args.algo, env_id, "trained")
    console.print(f"Saved {args.algo}/{env_id} in {ref.run_dir if ref else cache}")
    return 0


def results(args: argparse.Namespace) -> int:
    from quarl_bench.report.console import rows_table
    from quarl_bench.results import results_frame

    path = existing_store(args.store)
    with ResultStore(path) as store:
        frame = store.to_dataframe()
    if args.algo:
        frame = frame[frame["algo"] == args.algo]
    if args.env:
        frame = frame[frame["env_id"].str.startswith(args.env)]
    exported = results_frame(frame)  # the columns load_results gives
    if args.csv:
        exported.to_csv(args.csv, index=False)
        console.print(f"Wrote {len(frame)} rows to {args.csv}")
    if args.parquet:
        exported.to_parquet(args.parquet, index=False)
        console.print(f"Wrote {len(frame)} rows to {args.parquet}")
    console.print(rows_table(frame, f"{len(frame)} results in {path}"))
    return 0


def deploy_specs(args: argparse.Namespace, backends: list[str]) -> tuple:
    from quarl_bench.types import QuantSpec

    return tuple(
        QuantSpec(
            method="deploy",
            backend=backend,
            calibration_states=args.calibration_states,
            calibration_method=args.calibration_method,
        )
        for backend in dict.fromkeys(backends)
    )


def deploy(args: argparse.Namespace) -> int:
    require("deploy", "deploy", ("onnx", "onnxruntime"))
    from quarl_bench.api import run_deploy
    from quarl_bench.registry import EvalSettings
    from quarl_bench.report.console import deployment_console_table, result_line

    specs = deploy_specs(args, args.backend)
    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        rows = run_deploy(
            ref,
            specs,
            EvalSettings(args.episodes, args.seed, args.n_envs),
            store,
            args.force,
            on_result=once_per_row(lambda row, reused: console.print(result_line(row, reused))),
            on_error=lambda backend, reason: console.print(f"[yellow]{backend} cannot run here[/]: {reason}"),
        )
        console.print(deployment_console_table(rows, f"{ref_title(ref)}: deployed artifacts"))
        console.print(f"Stored in {store.path}")
    return 0


def table4(args: argparse.Namespace) -> int:
    require("deploy", "table4", ("onnx", "onnxruntime"))
    from quarl_bench.api import time_table4
    from quarl_bench.deploy.synthetic import machine
    from quarl_bench.report.console import table4_table

    console.print(f"Timing QuaRL Table 4 policies {', '.join(args.policy)} on {machine()} (one thread, batch 1)")
    with ResultStore(args.store or DEFAULT_STORE) as store:
        comparison = time_table4(
            args.policy,
            args.backend,
            args.calls,
            store,
            args.force,
            on_error=lambda policy, backend, why: console.print(
                f"[yellow]policy {policy}: {backend} cannot run here[/]: {why}"
            ),
        )
    console.print(table4_table(comparison))
    console.print(f"Stored in {store.path}; `quarl-bench report` writes table4.md next to the paper's figures")
    return 0


def export(args: argparse.Namespace) -> int:
    require("deploy", "export", ("onnx", "onnxruntime"))
    from quarl_bench.api import export_artifact

    spec = deploy_specs(args, [args.backend])[0]
    ref = _agent_for(args)
    artifact, readme = export_artifact(ref, spec, Path(args.out))
    console.print(f"wrote {args.out} ({artifact.nbytes} bytes, sha256 {artifact.sha256[:16]}) and {readme}")
    return 0


def agent_query(args: argparse.Namespace):
    """The agent flags of a single-agent command as an :class:`~quarl_bench.api.AgentQuery`."""
    from quarl_bench.api import AgentQuery

    return AgentQuery(
        args.env,
        args.algo,
        str(args.model) if args.model else None,
        args.policy_module,
        str(args.vecnormalize) if args.vecnormalize else None,
        dict(args.env_kwargs) if args.env_kwargs else None,
        tuple(args.env_package or ()),
        str(args.folder) if args.folder else None,
        str(args.cache) if args.cache else None,
        not getattr(args, "no_hub", False),
        args.train_if_missing,
        getattr(args, "seed", 0),
        args.trust_remote_code,
    )


def once_per_row(show: Callable[[dict, bool], None]) -> Callable[[dict, bool], None]:
    """``show`` for each stored row once (deploy hands the shared torch-fp32 reference back with every backend)."""
    shown: set[str] = set()

    def show_new(row: dict, reused: bool) -> None:
        if row["key"] not in shown:
            shown.add(row["key"])
            show(row, reused)

    return show_new


def _agent_for(args: argparse.Namespace, store: ResultStore | None = None):
    """Resolve and describe the agent of a single-agent command."""
    from quarl_bench.api import find_agent

    if store is not None:
        store.check()
    ref = find_agent(agent_query(args))
    where = ref.model_path or ref.run_dir
    console.print(f"Agent: [bold]{escape(ref_title(ref))}[/] from {escape(where)}")
    if ref.saved_env_id != ref.env_id:
        console.print(f"Note: this agent was saved for {ref.saved_env_id}; it runs on {ref.env_id}.")
    return ref


def print_not_quantized(rows: list[dict[str, Any]]) -> None:
    from quarl_bench.report.console import not_quantized_line

    line = not_quantized_line(rows)
    if line:
        console.print(line)


def sensitivity(args: argparse.Namespace) -> int:
    """Each acting layer alone at each precision (others fp32): reward, E%, agreement and decision-margin change."""
    import pandas as pd

    from quarl_bench.api import acting_layer_names
    from quarl_bench.methods.mixed import sensitivity_specs
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.registry import EvalSettings
    from quarl_bench.report.console import sensitivity_table
    from quarl_bench.report.layers import sensitivity_frame
    from quarl_bench.runner import Work, run_work

    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        names = acting_layer_names(ref)
        settings = EvalSettings(args.episodes, args.seed, args.n_envs, tuple(args.eval_seeds or ()), args.obs_noise)
        specs = tuple(sensitivity_specs(len(names), args.bits))
        console.print(f"{len(names)} acting layers x {len(args.bits)} precisions = {len(specs)} evaluations per seed")
        rows = run_work(
            Work(
                "ptq",
                ref.algo,
                ref.env_id,
                specs,
                settings,
                ref,
                driver=driver_provenance(),
                eval_workers=args.eval_workers,
            ),
            store,
            force=args.force,
        )
        console.print(sensitivity_table(sensitivity_frame(pd.DataFrame(rows))))
        print_not_quantized(rows)
        console.print(f"Stored in {store.path}; `quarl-bench report` draws the heatmap (sensitivity_*.png)")
    return 0


def mixed(args: argparse.Namespace) -> int:
    """Greedy per-layer bit allocation within ``--tolerance`` of fp32, verified on fresh seeds, stored as ``mixed``."""
    from quarl_bench.api import mixed_ladder, search_mixed
    from quarl_bench.methods.certify import CertifyConfig
    from quarl_bench.report.console import mixed_table, verdict_line

    mixed_ladder(args.bits, args.search_seeds, args.verify_seeds)  # bad flags: one line, before the store exists
    config = CertifyConfig(
        args.tolerance, confidence=args.confidence, max_episodes=args.max_episodes, seed=args.search_seeds[0]
    )
    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)

        def tried(allocation: tuple[str, ...], found) -> None:
            console.print(f"  tried {'/'.join(allocation)}:{verdict_line(found).split(':', 1)[1]}")

        found = search_mixed(
            ref,
            args.bits,
            args.tolerance,
            args.episodes,
            args.search_seeds,
            args.verify_seeds,
            store,
            args.n_envs,
            tried,
            config,
        )
        names = found.layer_names
        console.print(
            f"fp32 {found.fp32_reward:.2f} on search seeds {args.search_seeds}; each step certified against "
            f"{args.tolerance:g}% of (R_fp32 - R_random); layers least sensitive first: "
            f"{', '.join(names[i] for i in found.order)}"
        )
        console.print(
            f"Found {'/'.join(found.allocation)} after {len(found.tried)} certifications; verified on seeds "
            f"{args.verify_seeds} next to uniform PTQ"
        )
        console.print(mixed_table(found.rows, names, args.tolerance, found.fp32_reward - found.floor))
        print_not_quantized(found.rows)
        console.print(f"Stored in {store.path}; `quarl-bench report` draws the Pareto front (mixed_pareto_*.png)")
    return 0


def fidelity(args: argparse.Namespace) -> int:
    """fp32 and quantized policies side by side from the same seeds: where actions and trajectories part."""
    from quarl_bench.api import measure_fidelity
    from quarl_bench.registry import EvalSettings
    from quarl_bench.report.console import fidelity_table
    from quarl_bench.types import QuantSpec

    specs = [QuantSpec(p, args.granularity, args.symmetric, args.quantize_bias, layers=args.layers) for p in args.bits]
    settings = EvalSettings(args.episodes, args.seed, args.episodes, obs_noise=args.obs_noise)
    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        frame = measure_fidelity(ref, specs, settings, args.threshold, store, args.force)
        console.print(fidelity_table(frame))
        console.print(f"Stored in {store.path}; `quarl-bench report` plots the divergence steps (fidelity_*.png)")
    return 0
