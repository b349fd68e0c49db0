"""Commands that evaluate one agent: run, certify, sensitivity, mixed, fidelity."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.markup import escape

from quarl_bench.commands.common import _agent_for, agent_query, certify_progress, print_not_quantized
from quarl_bench.errors import QuarlError
from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore
from quarl_bench.store.agent_names import ref_title

if TYPE_CHECKING:
    from quarl_bench.jobs.grids import EvalSettings


def settings_from_args(args: argparse.Namespace, env_id: str, random_baseline: bool = False) -> EvalSettings:
    """The evaluation flags (:func:`~quarl_bench.parsers.arguments.add_evaluation` with statistics) as settings,
    the condition checked against the agent's env.

    :raises QuarlError: for a condition the env cannot play under.
    """
    from dataclasses import replace

    from quarl_bench.evaluation.perturbations import condition_for
    from quarl_bench.jobs.grids import EvalSettings

    perturb = args.perturb
    if args.obs_noise:  # one notion of a condition: --obs-noise is the registered obs-noise-abs
        perturb = ",".join(filter(None, (perturb, f"obs-noise-abs={args.obs_noise:g}")))
    condition = condition_for(perturb, env_id)
    seeds = tuple(args.eval_seeds or ())
    settings = EvalSettings(args.episodes, args.seed, args.n_envs, seeds, 0.0, random_baseline, condition)
    return replace(settings, judge=judge_from_args(args))


def judge_from_args(args: argparse.Namespace) -> str:
    """The job's judge from ``--success FN`` or ``--progress FN`` ('' for neither).

    :raises QuarlError: for both at once (one function judges a job), or a function that is not there.
    """
    from quarl_bench.errors import QuarlError
    from quarl_bench.evaluation.judges import judge_text, load_judge

    given = [(outcome, getattr(args, outcome, "")) for outcome in ("success", "progress")]
    given = [(outcome, rule) for outcome, rule in given if rule]
    if len(given) > 1:
        raise QuarlError("bad --success with --progress: expected one function judging each episode, not two")
    for outcome, rule in given:
        load_judge(rule, f"--{outcome}")
        return judge_text(outcome, rule)
    return ""


def run(args: argparse.Namespace) -> int:
    from quarl_bench.api import run_ptq
    from quarl_bench.parsers.arguments import spec_from_args
    from quarl_bench.report.console import result_line, result_table

    specs = tuple(spec_from_args(args, p) for p in args.bits)
    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        settings = settings_from_args(args, ref.env_id, random_baseline=args.random_baseline)
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
    from dataclasses import replace

    from quarl_bench.api import resolve
    from quarl_bench.api.evaluate import certify, certify_request
    from quarl_bench.api.harden import parent_agent
    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.evaluation.perturbations import condition_grid
    from quarl_bench.jobs.grids import grid_return_bounds
    from quarl_bench.parsers.arguments import check_executor, spec_from_args
    from quarl_bench.parsers.config_flags import config_from_args
    from quarl_bench.report.console import certification_table, verdict_line
    from quarl_bench.run.executors import make_executor
    from quarl_bench.store.provenance import driver_provenance

    config = config_from_args(CertifyConfig, args)  # validated before any agent is found or row stored
    if not args.grid and not args.env:
        raise QuarlError("certify needs --env (one agent) or --grid FILE (every agent of a grid)")
    specs = tuple(spec_from_args(args, p) for p in args.bits)
    check_executor(args)
    with ResultStore(args.store or DEFAULT_STORE) as store:
        store.check()
        agents = grid_certify_agents(args) if args.grid else [(None, specs)]
        grid_bounds = grid_return_bounds(args.grid) if args.grid else {}
        requests = []
        grid = condition_grid(config.perturb)  # a severity grid: one request per condition, α shared by all
        for ref, agent_specs in agents:
            if ref is None:
                ref = resolve(agent_query(args)) if args.json else _agent_for(args, store)
            baseline = parent_agent(ref) if args.against_parent else None
            if baseline is not None and not args.json:
                console.print(f"{escape(ref_title(ref))} against the parent's fp32: {escape(ref_title(baseline))}")
            bounds = grid_bounds.get(ref.env_id) if config.return_bounds is None else None
            agent_config = replace(config, return_bounds=bounds) if bounds else config
            for condition in grid:
                condition_config = replace(agent_config, perturb=condition)
                requests.append(certify_request(ref, agent_specs, condition_config, baseline, args.method, len(grid)))
        several = len(requests) > 1

        def on_verdict(ref, found) -> None:
            if not args.json:
                console.print((f"{escape(ref_title(ref))} " if several else "") + verdict_line(found))

        workers = args.workers or 1
        if not args.json and (workers > 1 or args.executor == "ray"):
            console.print(f"Certifying {len(requests)} agent(s) on executor {args.executor}, {workers} worker(s)")
        executor = make_executor(args.executor, store, workers, address=args.address)
        with certify_progress(requests, quiet=args.json) as on_progress:
            results = certify(requests, store, driver_provenance(), on_verdict, args.force, executor, on_progress)
        for result in results:
            if args.json:
                print(json.dumps(result.as_json()))
            else:
                if several:
                    console.print(f"Agent: [bold]{escape(ref_title(result.agent))}[/]")
                console.print(certification_table(result))
        if not args.json:
            console.print(f"Stored in {store.path}")
    return 0


def grid_certify_agents(args: argparse.Namespace) -> list:
    """``--grid``'s agents (filtered by --algo/--env), each with the PTQ specs the grid evaluates it at."""
    from quarl_bench.api import agent_sources, grid_agents

    sources = agent_sources(args.folder, args.cache, not args.no_hub, args.train_if_missing, args.trust_remote_code)
    return grid_agents(args.grid, args.algo, args.env, sources)


def sensitivity(args: argparse.Namespace) -> int:
    """Each acting layer alone at each precision (others fp32): reward, E%, agreement and decision-margin change."""
    import pandas as pd

    from quarl_bench.api import run_sensitivity
    from quarl_bench.report.console import sensitivity_table
    from quarl_bench.report.layers import sensitivity_frame

    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        settings = settings_from_args(args, ref.env_id)

        def planned(layers: int, evaluations: int) -> None:
            console.print(f"{layers} acting layers x {len(args.bits)} precisions = {evaluations} evaluations per seed")

        rows = run_sensitivity(ref, args.bits, settings, store, args.force, args.eval_workers, planned)
        console.print(sensitivity_table(sensitivity_frame(pd.DataFrame(rows))))
        print_not_quantized(rows)
        console.print(f"Stored in {store.path}; `quarl-bench report` draws the heatmap (sensitivity_*.png)")
    return 0


def mixed(args: argparse.Namespace) -> int:
    """Greedy per-layer bit allocation within ``--tolerance`` of fp32, verified on fresh seeds, stored as ``mixed``."""
    from quarl_bench.api import mixed_ladder, search_mixed
    from quarl_bench.certify.config import CertifyConfig
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
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.parsers.arguments import spec_from_args
    from quarl_bench.report.console import fidelity_table

    specs = [spec_from_args(args, p) for p in args.bits]
    settings = EvalSettings(args.episodes, args.seed, args.episodes, obs_noise=args.obs_noise)
    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        frame = measure_fidelity(ref, specs, settings, args.threshold, store, args.force)
        console.print(fidelity_table(frame))
        console.print(
            f"Stored in {store.path}; `quarl-bench report` plots the divergence steps (fidelity_*) and the "
            "error per step on fp32 trajectories (fidelity_over_time_*)"
        )
    return 0
