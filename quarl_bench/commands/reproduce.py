"""``quarl-bench reproduce``: the plan on the console, then each artifact's documented command in turn (each
resumes from the store), then the report with the reproduction's provenance beside it."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore


def reproduce(args: argparse.Namespace) -> int:
    from quarl_bench.api.reproduce import parse_duration, plan_reproduction, within_budget
    from quarl_bench.api.sweep import agent_sources
    from quarl_bench.report.console_reproduce import plan_table

    budget = parse_duration(args.budget) if args.budget else None
    sources = agent_sources(args.folder, args.cache, args.hub, args.train_if_missing, args.trust_remote_code)
    store_path = Path(args.store or DEFAULT_STORE)
    with ResultStore(store_path) as store:
        lines = plan_reproduction(sources, store, args.quick, tuple(args.only))
    chosen, left_out = within_budget(lines, budget)
    console.print(plan_table(lines, chosen, args.quick))
    for line in lines:
        if line.note:
            console.print(f"{line.artifact.name}: {line.note}", highlight=False)
        if line.agents:
            console.print(f"{line.artifact.name}: agents here: {', '.join(line.agents)}", highlight=False)
        if line.missing:
            console.print(
                f"{line.artifact.name}: no agent in the sources for {len(line.missing)}: {', '.join(line.missing)}; "
                "each would come from the hub as sb3/ALGO-ENV (add --hub)",
                highlight=False,
            )
    for line in left_out:
        console.print(f"left out by --budget {args.budget}: {line.artifact.name} (~{line.seconds / 60:.0f} min)")
    if args.plan:
        return 0
    return run_artifacts(chosen, store_path, Path(args.out), args.quick)


def run_artifacts(chosen: list, store_path: Path, out: Path, quick: bool) -> int:
    """Each artifact's command in this process, one after another (a failed one is reported, the next goes on),
    then ``report --html``; ``reproduction.json`` (commit, versions, machine, load, wall time per artifact) is kept as
    it goes, as ``record`` keeps its ``record_run.json``: a reproduction killed part-way leaves what it did, and the
    one that resumes it carries that on. A finished earlier reproduction's file is renamed by its time, not
    overwritten."""
    from quarl_bench.cli import main
    from quarl_bench.deploy.machine import load_record, load_text, machine_record
    from quarl_bench.errors import Interrupted
    from quarl_bench.progress import clock
    from quarl_bench.report.run_log import RunLog, continued_text, set_aside_finished
    from quarl_bench.store.provenance import driver_provenance

    estimate, path = sum(line.seconds for line in chosen), out / "reproduction.json"
    fields = driver_provenance() | {"quick": quick, "plan_seconds": round(estimate, 1), "machine": machine_record()}
    set_aside_finished(path)
    artifacts: list[dict[str, Any]] = []
    failures = 0
    with RunLog(path, fields | {"artifacts": []}, done_key="artifacts_done") as log:
        for number, line in enumerate(chosen, 1):
            console.print(
                f"[bold][{number}/{len(chosen)}] {line.artifact.paper}[/]: quarl-bench {' '.join(line.command)}  "
                f"({clock(log.wall())} elapsed, estimate {clock(line.seconds)} for this one, {clock(estimate)} in all)"
            )
            began, load = time.perf_counter(), load_record()
            try:
                code = main(list(line.command))
            except SystemExit as stop:  # argparse's exit for a command the plan built wrong: reported, the next goes on
                code = stop.code if isinstance(stop.code, int) else 2
            failures += code != 0
            took, load_after = time.perf_counter() - began, load_record()
            console.print(
                f"  {line.artifact.name}: {clock(took)} {against_estimate(took, line.seconds)}; "
                f"{load_text(load) or 'load not recorded'} at its start, {load_text(load_after) or 'not recorded'} "
                "at its end"
            )
            artifacts.append(
                {
                    "name": line.artifact.name,
                    "paper": line.artifact.paper,
                    "command": "quarl-bench " + " ".join(line.command),
                    "exit_code": code,
                    "wall_seconds": round(took, 1),
                    "estimated_seconds": round(line.seconds, 1),
                    "load_at_start": load,
                    "load_at_end": load_after,
                }
            )
            if code == 130:  # stopped from outside (Ctrl-C, SIGTERM): the reproduction stops too, what it did kept
                log.done_so_far(number - 1, len(chosen), artifacts=list(artifacts))
                raise Interrupted(
                    f"{line.artifact.name} stopped part-way, after {clock(log.wall())}; the same command resumes "
                    f"from the store ({path} keeps this run)"
                )
            log.done_so_far(number, len(chosen), artifacts=list(artifacts))
        out.mkdir(parents=True, exist_ok=True)
        report = ["report", "--store", str(store_path), "--out", str(out), "--html"]
        console.print(f"[bold]report[/]: quarl-bench {' '.join(report)}")
        code = main(report)
        if code == 130:
            raise Interrupted(f"the report stopped part-way, after {clock(log.wall())}; the same command writes it")
        failures += code != 0
        run = log.finish()
    against = (
        f"against the plan's {clock(estimate)} ({run['wall_over_plan']:.2f}x; "
        if run["wall_over_plan"] is not None
        else "with nothing planned (the store held every job; "
    )
    console.print(
        f"Reproduction: {clock(run['wall_seconds'])} in all {against}"
        f"{load_text(run['load_at_end']) or 'load not recorded'} at the end); provenance in {path}",
        highlight=False,
    )
    if continued := continued_text(run, path):
        console.print(continued, highlight=False)
    return 1 if failures else 0


def against_estimate(wall: float, estimate: float) -> str:
    """``against an estimate of 1m02s (1.10x)``; where nothing was estimated (the store held every job), it says so
    rather than a wall time over zero."""
    from quarl_bench.progress import clock

    if estimate <= 0:
        return "with nothing estimated (the store held every job)"
    return f"against an estimate of {clock(estimate)} ({wall / estimate:.2f}x)"
