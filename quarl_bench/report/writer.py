"""``quarl-bench report``: every table and figure, each from rows the store selects for one explicit variant.

The writers return :class:`~quarl_bench.report.objects.Table` and ``Figure`` objects; this module collects them
into one list, which the files, the console (:func:`console_lines`) and ``report.html`` all render.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from quarl_bench.report.objects import FileWriter, Item, Table
from quarl_bench.statistics import TOLERANCE_PCT
from quarl_bench.store import ResultStore, Variant


@dataclass
class Report:
    """What ``report`` made: its objects, the files written from them, and notes for the console."""

    items: list[Item]
    written: list[Path]
    notes: list[str] = field(default_factory=list)
    page: Path | None = None


def write_report(
    store: ResultStore,
    out_dir: Path,
    paper_dir: Path,
    tolerance_pct: float = TOLERANCE_PCT,
    formats: tuple[str, ...] = ("svg", "png"),
    html: bool = False,
    figure_workers: int = 2,
    all_files: bool = True,
) -> Report:
    """Write the report files into ``out_dir`` (figures in ``formats``: svg is what report.html embeds; png; pdf on
    request), and ``report.html`` with ``html``.

    The reward-error table is written once per PTQ variant in the store (seed, episodes, grid options, layer mode),
    each file named after its variant (no suffix for the default: seed 0, 100 episodes, default spec). Figures and
    the other tables use the primary variant: the default if the store has it, else the first one found.

    Without ``all_files``, the files a reader opens: tables as CSV, only those with rows, and no reward table of a
    variant whose every row is a certification batch (the verdict tables show those).
    """
    files = FileWriter(out_dir, formats, figure_workers, every_format=all_files)
    read = Read()
    try:
        notes = _collect(store, paper_dir, tolerance_pct, files, read, all_files)
    finally:
        written = files.close()
    report = Report(files.items, written, notes)
    if html:
        from quarl_bench.report.html import write_html_report

        report.page = write_html_report(store, report.items, out_dir, formats, read.variants, read.everything)
    return report


def console_lines(report: Report) -> list[str]:
    """What ``report`` prints: the console tables (verdicts first), the notes, then every file written."""
    lines = []
    for item in report.items:
        if isinstance(item, Table) and item.console:
            shown = item.frame.drop(columns=[c for c in ("rows",) if c in item.frame.columns])
            lines += [item.caption or item.name, shown.round(2).to_string(na_rep="-")]
    lines += report.notes
    return lines + [f"wrote {path}" for path in report.written + ([report.page] if report.page else [])]


@dataclass
class Read:
    """The store's rows a report read, kept for report.html: every row, and each PTQ variant's."""

    everything: pd.DataFrame | None = None
    variants: dict[Variant, pd.DataFrame] = field(default_factory=dict)


def _collect(
    store: ResultStore, paper_dir: Path, tolerance_pct: float, files: FileWriter, read: Read, all_files: bool = True
) -> list[str]:
    """Hand every report object to ``files`` as it is made (figures draw meanwhile); returns the notes."""
    from quarl_bench.report.actorq import actorq_report
    from quarl_bench.report.deployment import deployment_report, deployment_table, table4_comparison, table4_report
    from quarl_bench.report.divergence import fidelity_report
    from quarl_bench.report.hardened import hardening_report
    from quarl_bench.report.layers import layer_report
    from quarl_bench.report.methods import methods_report
    from quarl_bench.report.paper_page import paper_page_report
    from quarl_bench.report.plots import qat_figures, sweet_spot_figures, weight_figures
    from quarl_bench.report.rollout import rollout_report
    from quarl_bench.report.statistics import seeded_statistics, statistics_report
    from quarl_bench.report.tables import (
        amp_report,
        paper_reference,
        paper_vs_measured,
        qat_vs_ptq_table,
        reward_error_report,
        reward_error_table,
        weight_spread_report,
    )
    from quarl_bench.report.tidy import reward_error_shapes
    from quarl_bench.report.verdicts import is_own_fp32, verdict_report

    notes: list[str] = []
    verdicts = store.verdicts()
    files.add(verdict_report(verdicts))  # the answer first: certified verdicts, agents x precisions
    files.add(hardening_report(store.hardened(), verdicts, store.agent_names()))
    variants = store.variants("ptq") or [Variant()]
    primary = variants[0]
    default = read.variants[primary] = store.select(primary)
    files.add(paper_page_report(default, paper_dir, notes))  # every published cell, right after the verdicts
    # figures first, the slowest soonest: they draw in other processes while the tables compute
    everything = read.everything = store.to_dataframe()
    statistics = seeded_statistics(everything, tolerance_pct)
    certified = verdicts[verdicts["settings"].map(is_own_fp32)] if len(verdicts) else verdicts
    files.add(methods_report(statistics, everything, tolerance_pct, certified))
    files.add(sweet_spot_figures(default))
    files.add(weight_figures(default))
    files.add(statistics_report(everything, tolerance_pct, statistics))
    files.add(layer_report(everything))
    files.add(fidelity_report(store.fidelity()))
    files.add(actorq_report(everything, paper_dir))
    files.add(rollout_report(everything))
    behind_verdicts = {key for keys in verdicts["rows"] for key in keys} if len(verdicts) else set()
    for variant in variants:
        frame = read.variants[variant] = default if variant == primary else store.select(variant)
        batches = len(frame) and set(frame["key"]) <= behind_verdicts
        table = reward_error_table(frame)
        if not table.empty and (all_files or not batches or variant == primary):
            files.add([reward_error_report(table, variant.slug(), variant.label())])
            files.add(reward_error_shapes(frame, variant.slug(), variant.label()))
    notes.append(f"Figures and comparisons use the variant: {primary.label()}")
    files.add(weight_spread_report(default))
    qat_variants = store.variants("qat")
    qat_vs_ptq = qat_vs_ptq_table(store.select(qat_variants[0]), default) if qat_variants else pd.DataFrame()
    if len(qat_vs_ptq):
        files.add([Table("qat_vs_ptq", "QAT against PTQ", qat_vs_ptq), *qat_figures(qat_vs_ptq)])
    paper = paper_reference(paper_dir)
    comparisons = [
        paper_vs_measured(store.select(replace(primary, layers=mode)), paper, mode) for mode in ("paper", "quarl-code")
    ]
    comparisons = [c for c in comparisons if not c.empty]
    if comparisons:
        comparison = pd.concat(comparisons, ignore_index=True)
        files.add([Table("paper_vs_measured", "Paper vs measured", comparison)])
    tables = [
        deployment_table(store.select(v), store.select(Variant("ptq", v.seed, v.episodes)))
        for v in store.variants("deploy")
    ]
    files.add(deployment_report(pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()))
    timings = store.timings()
    if len(timings):
        table4 = table4_comparison(timings, pd.read_csv(paper_dir / "quarl_table4_deployment.csv"))
        files.add(table4_report(table4, timings))
    files.add(amp_report(everything, paper_dir))
    others = [v.label() for v in variants if v != primary]
    if others:
        notes.append(f"Other variants in the store, each in its own reward_error_table__*.md: {'; '.join(others)}")
    if len(everything) and (unreported := everything[~everything["method"].isin(REPORTED_METHODS)]).shape[0]:
        counts = unreported["method"].value_counts().sort_index()
        named = ", ".join(f"{method} ({count} rows)" for method, count in counts.items())
        notes.append(f"Unreported: no section of this report reads the rows of method {named}")
    return notes


# The methods whose stored rows some report section reads; a method registered since is named in the notes.
REPORTED_METHODS = ("ptq", "mixed", "random", "qat", "amp", "deploy", "actorq", "rollout")
