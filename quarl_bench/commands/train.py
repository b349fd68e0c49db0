"""Commands that train: qat, amp, actorq, rollout and train."""

from __future__ import annotations

import argparse

from quarl_bench.extras import require
from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore


def qat(args: argparse.Namespace) -> int:
    from quarl_bench.api import run_method
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.methods.qat import resolve_config
    from quarl_bench.report.console import result_table

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
        rows = run_method(config, store, EvalSettings(args.episodes, args.eval_seed), args.cache)
        training = rows[-1]["provenance"]["training"]
        console.print(
            f"trained {training['training_steps']} steps, fake quantization on from step {training['enabled_at_step']}"
            f" (delay {training['quant_delay']}); agent in {rows[-1]['agent_path']}"
        )
        console.print(result_table(rows, f"{config.algo} / {config.env_id} (qat)"))
        console.print(f"Stored in {store.path}")
    return 0


def amp(args: argparse.Namespace) -> int:
    from quarl_bench.api import run_amp
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.methods.amp import AmpConfig, default_dtype
    from quarl_bench.report.console import amp_console_table
    from quarl_bench.zoo.devices import training_device
    from quarl_bench.zoo.envs import resolve_env_id

    env_id, dtype = resolve_env_id(args.env), args.dtype or default_dtype()
    device = training_device(args.device)
    seeds = list(dict.fromkeys(args.seeds))
    configs = [
        AmpConfig(args.algo, env_id, arch, precision, args.n_timesteps, seed, device)
        for arch in args.policy_arch
        for seed in seeds
        for precision in ("fp32", dtype)
    ]

    def starting(config: AmpConfig) -> None:
        console.print(f"training {config.arch} policy in {config.dtype} on {device}, seed {config.seed} ...")

    with ResultStore(args.store or DEFAULT_STORE) as store:
        rows = run_amp(configs, EvalSettings(args.episodes, 0), store, args.cache, starting)
    title = f"Mixed-precision training: {args.algo} {env_id}, {args.n_timesteps} steps on {device}, seeds {seeds}"
    console.print(amp_console_table(title, rows))
    return 0


def actorq(args: argparse.Namespace) -> int:
    require("distributed", "ActorQ")
    from quarl_bench.actorq.config import FLAG_SETTINGS, requested_runs
    from quarl_bench.actorq.metrics import breakdown, learned, learner_bound
    from quarl_bench.api import run_actorq_runs
    from quarl_bench.report.console import breakdown_table

    overrides = {field: getattr(args, field) for field in FLAG_SETTINGS if getattr(args, field) is not None}
    configs = requested_runs(args.grid, overrides, args.algo, args.env, args.actor_precision, args.seeds)
    store_path = args.store or DEFAULT_STORE
    from quarl_bench.actorq.plan import plan_runs

    budget = args.budget * 60 if args.budget else None
    plan = plan_runs(configs, concurrent=args.concurrent, budget=budget)
    if args.plan:
        for line in plan.lines():
            console.print(line)
        return 0
    if (args.concurrent or 1) > plan.side_by_side and len(configs) > 1:
        console.print(
            f"[yellow]note:[/yellow] --concurrent {args.concurrent}: this machine holds {plan.side_by_side} run(s) "
            f"side by side ({plan.cores} cores, {plan.per_run} per run); more would thrash, so {plan.side_by_side}"
        )

    def starting(number: int, config, skipped: bool) -> None:
        prefix = f"[{number}/{len(configs)}] " if len(configs) > 1 else ""
        if skipped:
            console.print(
                f"{prefix}{config.algo} {config.env_id} {config.actor_precision}: already in the store, skipped"
            )
            return
        console.print(
            f"{prefix}ActorQ: {config.algo} {config.env_id}, {config.n_actors} {config.actor_precision} actors, "
            f"policy {list(config.policy_arch)}, comm {config.comm_bits} bits, seed {config.seed}"
        )

    def evaluated(point: dict, _cluster) -> None:
        run = f"[{point['run']}] " if "run" in point else ""
        console.print(
            f"  {run}{point['seconds']:7.1f} s  {point['actor_steps']:>8} actor steps  {point['updates']:>7} updates  "
            f"reward {point['reward']:.1f}"
        )

    def finished(row: dict) -> None:
        prov = row["provenance"]
        learner = prov["learner"]
        console.print(breakdown_table(breakdown(prov["actors"])))
        console.print(
            f"{prov['actor_steps']} actor steps in {row['wall_seconds']:.1f} s ({prov['actor_steps_per_s']:.0f}/s); "
            f"learner {learner['updates']} updates (samples per insert {learner['samples_per_insert']:.2f}); "
            f"{prov['broadcasts']} broadcasts of {prov['broadcast_bytes']} bytes; int8 weights on actors: "
            f"{all(a['int8_weights'] for a in prov['actors'])}; actor restarts: {prov['restarts']}; "
            f"final reward {row['mean_reward']:.1f}; stored in {store_path}"
        )
        energy = prov["energy"]
        console.print(
            f"energy {energy['kwh'] * 1000:.3f} Wh, {energy['emissions_kg'] * 1000:.3f} g CO2eq ({energy['source']})"
        )
        for caveat in (learner_bound(learner, prov["config"]["samples_per_insert"]), not_learned(prov["curve"])):
            if caveat:
                console.print(f"[yellow]note:[/yellow] {caveat}")

    def not_learned(curve: list[dict]) -> str | None:
        if learned(curve):
            return None
        best = max(point["reward"] for point in curve)
        first = curve[0]["reward"]
        return f"the learner never beat its first evaluation ({first:.1f}; best {best:.1f}): no time to reward"

    run_actorq_runs(configs, store_path, args.address, starting, evaluated, finished, plan.side_by_side)
    return 0


def rollout(args: argparse.Namespace) -> int:
    from quarl_bench.api import run_rollouts
    from quarl_bench.methods.rollout import FLAG_SETTINGS, job_for, requested_rollouts
    from quarl_bench.report.console import rollout_line, rollout_summary
    from quarl_bench.run.executors import default_workers

    overrides = {name: getattr(args, name) for name in FLAG_SETTINGS if getattr(args, name) is not None}
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


def train(args: argparse.Namespace) -> int:
    from quarl_bench.api import train_agent
    from quarl_bench.zoo.train import TrainOptions

    options = TrainOptions(args.conf_file, tuple(args.hyperparams), args.save_freq, args.resume)
    ref = train_agent(args.algo, args.env, args.cache, args.seed, args.n_timesteps, options)
    console.print(f"Saved {args.algo}/{ref.env_id if ref else args.env} in {ref.run_dir if ref else args.cache}")
    return 0
