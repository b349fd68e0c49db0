"""``quarl-bench sweep``: a YAML grid of jobs, planned, run on an executor, resumed where it stopped."""

from __future__ import annotations

import argparse

from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore


def sweep(args: argparse.Namespace) -> int:
    from quarl_bench.api import agent_sources, plan_sweep, run_sweep
    from quarl_bench.api.reproduce import measured_episode_seconds, work_seconds
    from quarl_bench.report.console import progress_bar, spec_text, summary_table

    sources = agent_sources(args.folder, args.cache, args.hub, args.train_if_missing, args.trust_remote_code)
    store_path = args.store or DEFAULT_STORE
    with ResultStore(store_path) as store:
        planned = plan_sweep(
            args.grid,
            sources,
            store,
            args.algo,
            args.env,
            args.bits,
            args.episodes,
            args.eval_seeds,
            args.executor,
            args.workers,
            args.force,
            args.random_baseline,
            args.address,
        )
        for line in skipped_lines(planned.skipped):
            console.print(line, highlight=False)
        console.print(
            f"Study {planned.study}: {len(planned.cells)} grid cells, {len(planned.works) - planned.training_runs} "
            f"evaluation batches and {planned.training_runs} training runs to do, {planned.already_stored} already "
            f"stored, {len(planned.skipped)} agent(s) skipped; {planned.workers} worker(s)"
        )
        # the bar counts the cost model's seconds, so its ETA weighs a long work (100 Atari games) as such
        measured = measured_episode_seconds(store)
        weights: dict[int, float] = {id(work): max(work_seconds(work, store, measured), 1e-3) for work in planned.works}
        typical = sum(weights.values()) / max(len(weights), 1)  # a work that comes back as a copy (a process pool)
        with progress_bar(sum(weights.values()), "estimated seconds of work") as update:
            done = {"seconds": 0.0}

            def on_done(work, rows, _error) -> None:
                done["seconds"] += weights.get(id(work), typical)
                last = rows[-1] if rows else None
                text = (
                    f"last: {last['algo']}/{last['env_id']} {spec_text(last)} {last['mean_reward']:.1f}"
                    if last
                    else None
                )
                update(done["seconds"], text)

            outcome = run_sweep(planned, sources, store, args.executor, args.force, args.address, on_done)
        for failure in outcome.failures:
            console.print(f"[red]failed[/] {failure}")
    if outcome.rows:
        console.print(summary_table(outcome.rows, f"{planned.study}: results in {store_path}"))
    return 1 if outcome.failures else 0


def skipped_lines(skipped: list) -> list[str]:
    """The agents a sweep skips, one line per reason: the resolver's "no ALGO agent for ENV: looked in ..." reads the
    same for each agent but its paths, so the agents are listed once and where the sources looked is said once."""
    by_reason: dict[str, list[str]] = {}
    for skip in skipped:
        reason = skip.reason
        if " agent for " in reason and "looked in " in reason:
            parts = reason.split("looked in ", 1)[1].split("; ")
            reason = "looked in " + "; ".join("the folder" if "*" in part else part for part in parts)
        by_reason.setdefault(reason, []).append(f"{skip.algo}/{skip.env_id}")
    return [f"[yellow]skipped {len(agents)}[/] ({reason}): {', '.join(agents)}" for reason, agents in by_reason.items()]
