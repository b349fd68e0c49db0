"""Commands that read the store: report and results."""

from __future__ import annotations

import argparse

from quarl_bench.commands.common import existing_store
from quarl_bench.errors import QuarlError
from quarl_bench.report.console import console
from quarl_bench.store import ResultStore


def report(args: argparse.Namespace) -> int:
    from quarl_bench.report.writer import console_lines, write_report

    with ResultStore(existing_store(args.store)) as store:
        tables = (store.to_dataframe(), store.timings(), store.fidelity(), store.verdicts(), store.hardened())
        if all(table.empty for table in tables):
            raise QuarlError(
                f"the store {str(store.path)!r} holds no rows: nothing to report (expected a store that run, "
                "sweep, certify, deploy, export, table4, fidelity, harden, actorq or rollout wrote)"
            )
        formats = tuple(args.formats or (("svg", "png") if args.all_files else ("svg",)))
        made = write_report(store, args.out, args.paper, args.tolerance, formats, args.html, all_files=args.all_files)
    for line in console_lines(made):
        console.print(line, markup=False)
    return 0


def results(args: argparse.Namespace) -> int:
    from quarl_bench.report.console_rows import rows_table
    from quarl_bench.store.results import as_text_columns, results_frame

    path = existing_store(args.store)
    with ResultStore(path) as store:
        frame = store.to_dataframe()
    if args.algo:
        frame = frame[frame["algo"] == args.algo]
    if args.env:
        frame = frame[frame["env_id"].str.startswith(args.env)]
    exported = results_frame(frame)  # the columns load_results gives
    if args.csv:
        as_text_columns(exported).to_csv(args.csv, index=False)  # per-episode lists and outcomes as JSON
        console.print(f"Wrote {len(frame)} rows to {args.csv}")
    if args.parquet:
        exported.to_parquet(args.parquet, index=False)
        console.print(f"Wrote {len(frame)} rows to {args.parquet}")
    console.print(rows_table(frame, f"{len(frame)} results in {path}"))
    return 0
