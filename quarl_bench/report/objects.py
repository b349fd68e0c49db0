"""What a report is made of: :class:`Table` and :class:`Figure` objects, each carrying its page section and the
stored rows behind it. Report writers return a list of them; the files (:func:`write_files`), the console and
``report.html`` all render that one list, so nothing written can be missing from the page.

A figure is a drawing function and its data rather than a drawn matplotlib figure: drawing and saving (most of a
report's time) then run in other processes while this one computes the next table.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

# The page's sections, in order (report.html); a section with no object is left out.
SECTIONS = (
    "Certified verdicts",
    "The papers, cell by cell",
    "Hardened agents",
    "Reward and E% per variant",
    "Outcomes: success, progress, cost",
    "Minimum safe bits",
    "Sweet spot: reward against bits",
    "Weight distributions",
    "Quantization methods",
    "Per-layer sensitivity",
    "Mixed precision",
    "Closed-loop fidelity",
    "QAT against PTQ",
    "Normalised scores",
    "Deployment",
    "QuaRL Table 4: deployment latency",
    "ActorQ",
    "Quantized rollouts",
    "Paper vs measured",
    "Mixed-precision training",
    "Other methods",
)
ROW_KEY = re.compile(r"\b[0-9a-f]{24}\b")
ROW_COLUMNS = ("rows", "row", "row key", "row keys", "key")  # name the stored rows behind the whole line
CELL_ROWS_SUFFIX = " rows"  # "X rows" names the stored rows behind column X's cell

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext


def keys_in(values: Iterable[Any]) -> tuple[str, ...]:
    """The stored row keys named in some cells (``rows``-style columns hold them space-separated), in order."""
    found: dict[str, None] = {}
    for value in values:
        if isinstance(value, str):
            found.update(dict.fromkeys(ROW_KEY.findall(value)))
    return tuple(found)


@dataclass
class Table:
    """A table of the report.

    :param name: its file stem (``name.csv``, ``name.md``, and ``name.tex`` with ``latex``).
    :param section: the page section it belongs to (one of :data:`SECTIONS`).
    :param frame: what it shows; ``rows``-style columns name the stored rows behind lines and cells.
    :param caption: a line above it in the Markdown file and on the console.
    :param markdown: the whole Markdown file when it is more than the caption and the frame.
    :param decimals: rounding in the Markdown file (None: ``floatfmt`` ``.4g``).
    :param index: whether the frame's index is part of the table (the reward-error table's envs).
    :param on_page: shown in report.html (the reward-error tables are, as the variant selector's rows).
    :param console: printed by ``quarl-bench report``.
    """

    name: str
    section: str
    frame: pd.DataFrame
    caption: str = ""
    markdown: str | None = None
    decimals: int | None = 2
    latex: bool = False
    index: bool = False
    on_page: bool = True
    console: bool = False

    @property
    def row_keys(self) -> tuple[str, ...]:
        columns = [c for c in self.frame.columns if c in ROW_COLUMNS or str(c).endswith(CELL_ROWS_SUFFIX)]
        return keys_in(value for column in columns for value in self.frame[column])

    def markdown_text(self) -> str:
        if self.markdown is not None:
            return self.markdown
        shown = self.frame.round(self.decimals) if self.decimals is not None else self.frame
        body = shown.to_markdown(index=self.index, **({} if self.decimals is not None else {"floatfmt": ".4g"}))
        return (f"{self.caption}\n\n" if self.caption else "") + body + "\n"


@dataclass
class Figure:
    """A figure of the report: ``draw(*data)`` returns a matplotlib figure (a module-level function, so another
    process can run it), saved as ``name.{svg,png,...}`` at ``dpi``.

    :param row_keys: the stored rows it is drawn from.
    :param on_page: shown in report.html (False only for a grid that repeats the figures beside it).
    """

    name: str
    section: str
    draw: Callable[..., Any]
    data: tuple[Any, ...]
    dpi: int
    row_keys: tuple[str, ...] = ()
    on_page: bool = True


Item = Table | Figure
DRAWING_MODULES = [
    "matplotlib.pyplot",
    "pandas",
    "quarl_bench.report.plots",
    "quarl_bench.report.methods",
    "quarl_bench.report.hardened",
]


def panel_margins(
    fig: Any,
    left: float = 0.75,
    right: float = 0.25,
    top: float = 0.7,
    bottom: float = 0.6,
    wspace: float = 0.75,
    hspace: float = 0.9,
) -> None:
    """Margins in inches for a figure of several panels, in place of ``tight_layout``: measuring every tick label
    of many log axes was most of a report's drawing time. ``wspace``/``hspace``: inches between panels."""
    width, height = fig.get_size_inches()
    columns, rows = _grid_shape(fig)
    panel_w = (width - left - right - wspace * (columns - 1)) / columns
    panel_h = (height - top - bottom - hspace * (rows - 1)) / rows
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / height,
        bottom=bottom / height,
        wspace=wspace / panel_w,
        hspace=hspace / panel_h,
    )


def plain_log_axis(axis: Any) -> None:
    """Log-scale tick labels as plain numbers (``100``, ``1e+04``) rather than mathtext powers of ten: parsing
    mathtext for every tick of every panel was a tenth of a report's drawing time."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def _grid_shape(fig: Any) -> tuple[int, int]:
    """(columns, rows) of a figure's subplot grid."""
    spec = fig.axes[0].get_subplotspec().get_gridspec()
    return spec.ncols, spec.nrows


def table_files(table: Table, out_dir: Path, every_format: bool = True) -> list[Path]:
    """Write a table's CSV file, and with ``every_format`` its Markdown (and LaTeX) too; an empty table writes
    nothing unless ``every_format`` (report.html and the console show every table)."""
    if table.frame.empty and not every_format:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / f"{table.name}.csv"
    table.frame.to_csv(csv, index=table.index)
    if not every_format:
        return [csv]
    md = out_dir / f"{table.name}.md"
    md.write_text(table.markdown_text())
    paths = [md, csv]
    if table.latex:
        tex = out_dir / f"{table.name}.tex"
        tex.write_text(latex_tabular(table.frame))
        paths.append(tex)
    return paths


LATEX_SPECIAL = str.maketrans({c: "\\" + c for c in "&%$#_{}"})


def latex_tabular(frame: pd.DataFrame, decimals: int = 2) -> str:
    """A booktabs ``tabular`` of a frame, its index as the first column and two-level columns as two header rows
    (pandas' ``to_latex`` goes through its Styler, which took a second per report)."""

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and pd.isna(value)):
            return ""
        return f"{value:.{decimals}f}" if isinstance(value, float) else str(value).translate(LATEX_SPECIAL)

    columns = list(frame.columns)
    lines = [f"\\begin{{tabular}}{{l{'r' * len(columns)}}}", "\\toprule"]
    if isinstance(frame.columns, pd.MultiIndex):
        groups = [(top, len(list(run))) for top, run in itertools.groupby(top for top, _ in columns)]
        lines.append(" & " + " & ".join(f"\\multicolumn{{{n}}}{{c}}{{{cell(top)}}}" for top, n in groups) + " \\\\")
        lines.append(" & " + " & ".join(cell(metric) for _, metric in columns) + " \\\\")
    else:
        lines.append(" & " + " & ".join(cell(c) for c in columns) + " \\\\")
    lines.append("\\midrule")
    for index, row in zip(frame.index, frame.itertuples(index=False), strict=True):
        lines.append(" & ".join([cell(index), *(cell(v) for v in row)]) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


def figure_paths(figure: Figure, out_dir: Path, formats: tuple[str, ...]) -> list[Path]:
    return [out_dir / f"{figure.name}.{ext}" for ext in formats]


def draw_and_save(draw: Callable[..., Any], data: tuple[Any, ...], paths: list[Path], dpi: int) -> None:
    """Draw one figure and save it in every format (in a worker process, or this one)."""
    import matplotlib
    import matplotlib.pyplot as plt

    # the backend is the process's own (the CLI and its workers run with MPLBACKEND=Agg; a notebook keeps its
    # inline one), and the SVG setting holds for this figure only: text stays text (a third of the SVG time)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig = draw(*data)
        for path in paths:
            fig.savefig(path, dpi=dpi)
    plt.close(fig)


class FileWriter:
    """Writes the report's files as its objects arrive: tables at once, figures in ``workers`` other processes
    (spawned on the first figure; 0: in this process). :meth:`close` waits for every figure, and a failed one
    raises there."""

    def __init__(
        self, out_dir: Path, formats: tuple[str, ...] = ("svg", "png"), workers: int = 2, every_format: bool = True
    ) -> None:
        self.out_dir, self.formats, self.workers = out_dir, tuple(formats), workers
        self.every_format = every_format
        self.items: list[Item] = []
        self.written: list[Path] = []
        self.pool: Any = None
        self.futures: list[Any] = []

    def add(self, items: Iterable[Item]) -> None:
        for item in items:
            self.items.append(item)
            if isinstance(item, Table):
                self.written += table_files(item, self.out_dir, self.every_format)
                continue
            self.out_dir.mkdir(parents=True, exist_ok=True)
            paths = figure_paths(item, self.out_dir, self.formats)
            self.written += paths
            if self.workers == 0:
                draw_and_save(item.draw, item.data, paths, item.dpi)
                continue
            if self.pool is None:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                # a fresh server process imports the drawing modules once and forks each worker from itself: no fork
                # of this process (it may hold torch's threads), no import per worker
                context: BaseContext
                if "forkserver" in multiprocessing.get_all_start_methods():
                    context = multiprocessing.get_context("forkserver")
                    context.set_forkserver_preload(DRAWING_MODULES)
                else:  # Windows: each worker imports the drawing modules itself
                    context = multiprocessing.get_context("spawn")
                self.pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
            self.futures.append(self.pool.submit(draw_and_save, item.draw, item.data, paths, item.dpi))

    def close(self) -> list[Path]:
        try:
            for future in self.futures:
                future.result()
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)
                self.pool = None
        return self.written
