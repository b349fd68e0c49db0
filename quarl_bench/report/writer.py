"""``quarl-bench report``: every table and figure, each from rows the store selects for one explicit variant.

The writers return :class:`~quarl_bench.report.objects.Table` and ``Figure`` objects; this module collects them
into one list, which the files, the console (:func:`console_lines`) and ``report.html`` all render.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    """Hand every registered section's objects to ``files`` as they are made (figures draw meanwhile), then the rows
    of methods no section reads; returns the notes."""
    from quarl_bench.registry import METHODS
    from quarl_bench.report.sections import SECTION_WRITERS, ReportInput, other_methods

    inputs = ReportInput(store, paper_dir, tolerance_pct, all_files, read.variants)
    everything = read.everything = inputs.everything
    for method in everything["method"].unique() if len(everything) else ():
        if method in METHODS.names():
            METHODS.load(method)  # its module may register a section of its own
    for section in SECTION_WRITERS:
        files.add(section.write(inputs))
    files.add(other_methods(inputs))
    return inputs.notes
