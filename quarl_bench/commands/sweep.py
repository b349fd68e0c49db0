"""``quarl-bench sweep``: a YAML grid of jobs, planned, run on an executor, resumed where it stopped."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quarl_bench.errors import QuarlError
from quarl_bench.extras import require
from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore

if TYPE_CHECKING:
    from quarl_bench.registry import GridCell


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
