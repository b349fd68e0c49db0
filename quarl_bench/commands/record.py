"""``quarl-bench record``: the certified record of a zoo folder (plan, run, write), and ``record diff OLD NEW``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from quarl_bench.commands.common import console
from quarl_bench.errors import QuarlError
from quarl_bench.store import DEFAULT_STORE, ResultStore


def record(args: argparse.Namespace) -> int:
    if args.action and args.action[0] == "diff":
        return diff(args)
    if args.action:
        raise QuarlError(f"bad record action {' '.join(args.action)!r}: expected none (record a zoo) or diff OLD NEW")
    import os

    from rich.markup import escape

    from quarl_bench.api.record import (
        WORKER_EFFICIENCY,
        coverage_text,
        plan_seconds,
        record_requests,
        record_table,
        run_record,
        within_budget,
        worker_speedup,
        zoo_candidates,
    )
    from quarl_bench.commands.common import certify_progress
    from quarl_bench.deploy.machine import load_text
    from quarl_bench.parsers.arguments import check_executor
    from quarl_bench.progress import clock
    from quarl_bench.report.console import verdict_line
    from quarl_bench.report.run_log import RunLog, continued_text
    from quarl_bench.store.agent_names import ref_title
    from quarl_bench.zoo.agents import ZOO_ENV

    check_executor(args)
    args.workers = args.workers or 1
    folder = Path(args.folder or os.environ.get(ZOO_ENV, ""))
    if not str(folder) or not folder.is_dir():
        raise QuarlError(f"bad --folder {str(folder)!r}: expected an rl-zoo3 log folder (algo/ENV_N/ENV.zip)")
    candidates = zoo_candidates(folder, args.algo or (), args.env or ())
    context = _plan_context(Path(args.store or DEFAULT_STORE), args.perturb or "")
    if args.budget:
        from quarl_bench.api.reproduce import parse_duration

        every = len([c for c in candidates if c.ref is not None])
        candidates = within_budget(candidates, parse_duration(args.budget), args.workers, context)
        left = every - len([c for c in candidates if c.ref is not None])
        console.print(f"--budget {args.budget}: {left} agent(s) left out (the next run resumes and takes them)")
    runnable = [c for c in candidates if c.ref is not None]
    seconds, per_kind = plan_seconds(candidates, args.workers, context)
    console.print(f"{len(runnable)} agents to certify in {folder}: {coverage_text(candidates)}")
    console.print(
        f"estimated {clock(seconds)} on {args.workers} worker(s) here ("
        + ", ".join(f"{kind} {clock(value)}" for kind, value in sorted(per_kind.items()))
        + f"); on a Ray cluster of N cores about {clock(seconds * worker_speedup(args.workers))} / ({WORKER_EFFICIENCY} N)"
        + (f"; {len(context.verdicts)} verdicts already stored are reused" if len(context.verdicts) else "")
    )
    for candidate in candidates:
        if candidate.ref is None:
            console.print(f"  not run: {candidate.algo} {candidate.saved_env}: {candidate.reason}")
    if args.plan:
        return 0
    out = Path(args.out)
    with ResultStore(args.store or DEFAULT_STORE) as store:
        store.check()
        requests = record_requests(candidates, args.perturb)
        log = RunLog(out / "record_run.json", run_record_fields(args, seconds, per_kind))
        with log, certify_progress(requests, what=f"questions (plan {clock(seconds)})") as on_progress:

            def answered(done: int, total: int) -> None:
                log.done_so_far(done, total)
                if on_progress is not None:
                    on_progress(done, total)

            results = run_record(
                requests,
                store,
                args.workers,
                lambda ref, found: console.print(f"{escape(ref_title(ref))} {verdict_line(found)}"),
                answered,
                args.executor,
                args.address,
            )
            table = record_table(results, store, candidates)
            write_record(table, store, out, coverage_text(candidates))
            run = log.finish()
    console.print(table.to_string(index=False))
    against = (
        f"against the plan's {clock(seconds)} ({run['wall_over_plan']:.2f}x)"
        if run["wall_over_plan"] is not None
        else "with nothing planned (the store answered every question)"
    )
    console.print(
        f"record: {clock(run['wall_seconds'])} {against} on {args.workers} worker(s), executor {args.executor}; "
        f"{load_text(run['load_at_start']) or 'load not recorded'} at its start, "
        f"{load_text(run['load_at_end']) or 'not recorded'} at its end"
    )
    if continued := continued_text(run, out / "record_run.json"):
        console.print(continued, highlight=False)
    console.print(
        f"wrote {out}/record.md, record.csv, record_verdicts.csv, record.svg and record_run.json; stored in {store.path}"
    )
    return 0


def run_record_fields(args: argparse.Namespace, plan: float, per_kind: dict[str, float]) -> dict[str, Any]:
    """What a record run is, for its ``record_run.json`` (kept as it goes, as ``reproduce`` keeps its own): the
    command, the code, the plan in all and per env kind, the workers and the machine. A resumed run's plan counts
    only what was left."""
    from quarl_bench.deploy.machine import machine_record
    from quarl_bench.store.provenance import driver_provenance

    return driver_provenance() | {
        "plan_seconds": round(plan, 1),
        "plan_seconds_per_kind": {kind: round(value, 1) for kind, value in sorted(per_kind.items())},  # on one
        "workers": args.workers,
        "executor": args.executor,
        "machine": machine_record(),
    }


def _plan_context(path: Path, perturb: str):
    """What the plan reads from an existing store (this machine's seconds per episode, the verdicts a resumed record
    reuses), and the suite; a bad suite is one line here, before anything runs."""
    from quarl_bench.api.record import PlanContext
    from quarl_bench.api.reproduce import measured_episode_seconds
    from quarl_bench.evaluation.perturbations import condition_grid

    if perturb:
        condition_grid(perturb)
    if not path.is_file():
        return PlanContext(perturb=perturb)
    with ResultStore(path) as store:
        return PlanContext(measured_episode_seconds(store), store.verdicts(), perturb)


def write_record(table, store: ResultStore, out: Path, coverage: str = "") -> None:
    """The record's table (Markdown and CSV), its coverage counted from the zoo's folders, and its tidy verdicts
    (what ``record diff`` compares); the verdict counts come from the same verdicts as the CSV."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from quarl_bench.api.record import draw_record
    from quarl_bench.api.record_diff import tidy_record

    table.to_csv(out / "record.csv", index=False)
    tidy = tidy_record(store.verdicts())
    counts = tidy["verdict"].value_counts() if len(tidy) else pd.Series(dtype=int)
    summary = f"{len(tidy)} verdicts: " + ", ".join(f"{int(n)} {verdict}" for verdict, n in counts.items())
    (out / "record.md").write_text(
        (f"{coverage}.\n\n" if coverage else "") + f"{summary}.\n\n" + table.to_markdown(index=False) + "\n"
    )
    tidy.to_csv(out / "record_verdicts.csv", index=False)
    if (table["status"] == "certified").any():
        figure = draw_record(table)
        figure.savefig(out / "record.svg")
        plt.close(figure)


def _where(line: Any) -> str:
    """A diffed verdict's agent, condition and spec: ``dqn CartPole-v1 [action-noise=0.05] int8``."""
    from rich.markup import escape

    return escape(f"{line['algo']} {line['env']} [{line.get('condition', 'nominal')}] {line['spec']}")


def _evidence(line: Any, side: str) -> str:
    """One side's evidence in full: pairs, mean, the interval, δ and its bounds where the record carries them."""
    text = (
        f"{int(line[f'episodes_{side}'])} pairs, mean {float(line[f'mean_{side}']):+.2f}, "
        f"[{float(line[f'lower_{side}']):.2f}, {float(line[f'upper_{side}']):.2f}]"
    )
    if f"delta_{side}" in line:
        text += f", δ {float(line[f'delta_{side}']):.2f}"
    low, high = line.get(f"delta_low_{side}"), line.get(f"delta_high_{side}")
    if low is not None and high is not None and low == low and high == high:
        text += f" in [{float(low):.2f}, {float(high):.2f}]"
    return text


def diff(args: argparse.Namespace) -> int:
    """Exit 1 when a confirmatory verdict changed between the two records, else 0."""
    from quarl_bench.api.record_diff import diff_records, read_record

    if len(args.action) != 3:
        raise QuarlError("bad record diff: expected record diff OLD NEW (two stores or two record_verdicts.csv)")
    old, new = (read_record(Path(path)) for path in args.action[1:])
    found = diff_records(old, new)
    changes = found.version_changes()
    console.print(
        f"versions that differ: {'; '.join(changes)}" if changes else f"versions: the same ({found.versions[0]})"
    )
    console.print(f"CPU kinds: {found.cpu_kinds[0]} -> {found.cpu_kinds[1]}")
    for _, line in found.changed.iterrows():
        label = "" if not (line["exploratory_old"] and line["exploratory_new"]) else " (exploratory)"
        console.print(
            f"changed{label}: {_where(line)}: {line['verdict_old']} -> {line['verdict_new']} "
            f"({_evidence(line, 'old')} -> {_evidence(line, 'new')})"
        )
    for name, frame in (("only in OLD", found.only_old), ("only in NEW", found.only_new)):
        for _, line in frame.iterrows():
            console.print(f"{name}: {_where(line)}")
    console.print(
        f"{len(found.changed)} verdicts changed ({found.confirmatory_changes} confirmatory), "
        f"{len(found.only_old)} only in OLD, {len(found.only_new)} only in NEW; of the verdicts that held, "
        f"{found.identical} on the same pairs and interval, {found.same_verdict_other_evidence} on other evidence"
    )
    sys.stdout.flush()
    return 1 if found.confirmatory_changes else 0
