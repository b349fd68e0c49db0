"""``quarl-bench report --html``: one self-contained page of the report, figures embedded, no network needed.

The reward-error rows of every variant, one table per variant behind a selector, each row carrying the stored row it
is (key, command, commit); then the report's own tables and figures, section by section, for what the store holds.
"""

from __future__ import annotations

import base64
import html
import re
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from quarl_bench.report.estimators import bootstrap_ci
from quarl_bench.store import ResultStore, Variant

# (title, table file stem in the report folder, figure file prefixes): a section appears when any of them exists
SECTIONS = (
    ("Minimum safe bits", "minimum_safe_bits", ()),
    ("Sweet spot: reward against bits", None, ("sweetspot_",)),
    ("Weight distributions", "weight_spread_vs_error", ("weights_",)),
    ("Quantization methods", "methods_safe_width", ("wa_heatmap", "compression_frontier")),
    ("Per-layer sensitivity", "sensitivity", ("sensitivity_",)),
    ("Mixed precision", "mixed_pareto", ("mixed_pareto_",)),
    ("Closed-loop fidelity", "fidelity", ("fidelity_",)),
    ("QAT against PTQ", "qat_vs_ptq", ("qat_vs_ptq_",)),
    ("Normalised scores", "normalised_aggregates", ("performance_profile",)),
    ("Deployment", "deployment", ("deployment_",)),
    ("QuaRL Table 4: deployment latency", "table4", ()),
    ("ActorQ", "actorq_speedup", ("actorq_",)),
    ("Quantized rollouts", "rollout_final", ("rollout_",)),
    ("Paper vs measured", "paper_vs_measured", ()),
)
ROW_KEY = re.compile(r"\b[0-9a-f]{24}\b")
ROW_COLUMNS = ("rows", "row", "row key", "row keys")  # name the stored rows behind the whole line
CELL_ROWS_SUFFIX = " rows"  # "X rows" names the stored rows behind column X's cell
SCRIPT = """
const select = document.getElementById('variant');
function show() {
  for (const block of document.querySelectorAll('[data-variant]')) {
    block.hidden = block.dataset.variant !== select.value;
  }
}
select.addEventListener('change', show);
show();
"""
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; }
td:first-child, td:nth-child(2), td:nth-child(3), th:first-child, th:nth-child(2), th:nth-child(3) { text-align: left; }
tr[title] { cursor: help; }
img { max-width: min(100%, 1100px); border: 1px solid #eee; margin: 0.5em 0; }
.note { color: #666; font-size: 0.9em; }
"""


def variant_rows(selected: pd.DataFrame) -> pd.DataFrame:
    """One line per stored row of a variant: reward with its bootstrap CI, E% and agreement against its own fp32
    reference row, and the row's key, command and commit."""
    records = []
    for _, row in selected.sort_values(["algo", "env_id", "bits"], ascending=[True, True, False]).iterrows():
        low, high = bootstrap_ci(row["episode_rewards"])
        provenance = row["provenance"]
        records.append(
            {
                "algo": row["algo"],
                "env": row["env_id"],
                "precision": row["precision"],
                "reward": row["mean_reward"],
                "95% CI": f"[{low:.1f}, {high:.1f}]",
                "fp32 reward": row.get("fp32_reward"),
                "E %": row["error_pct"],
                # on one fixed set of fp32-visited states, the same for every width (evaluation/fixed_states.py)
                "flips, fp32 states": row["agreement"].get("fixed_flip_rate"),  # discrete actions
                "flips, near-ties": row["agreement"].get("fixed_flip_near_tie"),
                "flips, clear": row["agreement"].get("fixed_flip_clear"),
                "action rel. error, fp32 states": row["agreement"].get("fixed_action_rel_error"),  # continuous
                # on the states each policy visits itself: not comparable across widths
                "same actions, own states": row["agreement"].get("action_agreement"),
                "episodes": row["episodes"],
                "_key": row["key"],
                "_command": provenance.get("command", ""),
                "_commit": provenance.get("git_commit", ""),
            }
        )
    return pd.DataFrame.from_records(records)


def _number(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else html.escape(str(value))


def rows_html(rows: pd.DataFrame) -> str:
    """A table whose every line names its stored row in a tooltip and a last column."""
    shown = [c for c in rows.columns if not c.startswith("_")]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in [*shown, "row"])
    body = []
    for _, row in rows.iterrows():
        origin = f"row {row['_key']} · {row['_command']} · commit {row['_commit']}"
        cells = "".join(f"<td>{_number(row[c])}</td>" for c in shown)
        body.append(f'<tr title="{html.escape(origin)}">{cells}<td><code>{row["_key"]}</code></td></tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def row_origins(store: ResultStore, results: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """Stored row key -> (command, commit) that wrote it, for result and timing rows."""
    origins = {}
    for frame in (results, store.timings()):
        for key, provenance in zip(frame.get("key", []), frame.get("provenance", []), strict=True):
            origins[key] = (provenance.get("command", ""), provenance.get("git_commit", ""))
    return origins


def row_keys(text: object) -> list[str]:
    """The stored row keys a report cell names (``rows``-style columns hold them space- or comma-separated)."""
    return ROW_KEY.findall(text) if isinstance(text, str) else []


def origin_title(text: object, origins: dict[str, tuple[str, str]]) -> str:
    """The stored rows named in ``text``, grouped by the command and commit that wrote them (a table's rows often
    share both, and a tooltip per cell must stay short)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for key in dict.fromkeys(row_keys(text)):
        groups.setdefault(origins.get(key, ("?", "?")), []).append(key)
    return "\n".join(f"rows {' '.join(k)} · {command} · commit {commit}" for (command, commit), k in groups.items())


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    return f"{value:.4g}" if isinstance(value, float) else html.escape(str(value))


def _keys_cell(text: object) -> str:
    """A line's row keys, short: one key as itself, several as their count (the tooltip lists them)."""
    keys = row_keys(text)
    return f"<code>{keys[0]}</code>" if len(keys) == 1 else f"{len(keys)} rows" if keys else _cell(text)


def _title(text: str) -> str:
    return f' title="{html.escape(text)}"' if text else ""


def table_html(path: Path, origins: dict[str, tuple[str, str]]) -> str:
    """A report table (its CSV) as HTML whose cells name the stored rows behind them (keys, command, commit) in a
    tooltip: a line's ``rows``/``row key`` column covers the line; column "X rows" covers column X's cell."""
    frame = pd.read_csv(path)
    cell_rows = {c[: -len(CELL_ROWS_SUFFIX)]: c for c in frame.columns if c.endswith(CELL_ROWS_SUFFIX)}
    line_rows = [c for c in frame.columns if c in ROW_COLUMNS]
    shown = [c for c in frame.columns if c not in cell_rows.values()]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown)
    body = []
    for _, line in frame.iterrows():
        line_title = "\n".join(t for c in line_rows if (t := origin_title(line[c], origins)))
        cells = "".join(
            f"<td{_title(origin_title(line[cell_rows[c]], origins)) if c in cell_rows else ''}>"
            f"{_keys_cell(line[c]) if c in line_rows else _cell(line[c])}</td>"
            for c in shown
        )
        body.append(f"<tr{_title(line_title)}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def figure_html(path: Path) -> str:
    """A figure as an embedded image: its SVG where the report wrote one, else its PNG."""
    mime = "image/svg+xml" if path.suffix == ".svg" else "image/png"
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img alt="{html.escape(path.stem)}" src="data:{mime};base64,{data}"></figure>'


def section_figures(out_dir: Path, prefixes: tuple[str, ...]) -> list[Path]:
    """The report's figures of a section, one file per figure, SVG preferred."""
    names = sorted({p.stem for prefix in prefixes for ext in ("svg", "png") for p in out_dir.glob(f"{prefix}*.{ext}")})
    names = [name for name in names if not name.endswith("_grid")]  # a grid repeats the figures beside it
    return [svg if (svg := out_dir / f"{name}.svg").is_file() else out_dir / f"{name}.png" for name in names]


def write_html_report(store: ResultStore, out_dir: Path) -> Path:
    """``report.html`` in ``out_dir``, from the store and the report files already written there."""
    results = store.to_dataframe()
    origins = row_origins(store, results)
    variants = store.variants("ptq") or [Variant()]
    options, blocks = [], []
    for i, variant in enumerate(variants):
        rows = variant_rows(store.select(variant))
        if rows.empty:
            continue
        value = f"v{i}"
        options.append(f'<option value="{value}">{html.escape(variant.label())}</option>')
        blocks.append(f'<div data-variant="{value}">{rows_html(rows)}</div>')
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>quarl-bench report: {html.escape(store.path.name)}</title><style>{STYLE}</style></head><body>",
        "<h1>quarl-bench report</h1>",
        f"<p class='note'>Store <code>{html.escape(str(store.path))}</code>, {len(results)} rows; "
        f"written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. Hover a line or a cell for the stored rows behind it.</p>",
    ]
    verdicts = out_dir / "certified_verdicts.csv"
    if verdicts.is_file():  # the answer first
        parts += [
            "<h2>Certified verdicts</h2>",
            "<p class='note'>Per agent and precision: safe, unsafe or undetermined against the tolerance δ, decided by "
            "an anytime-valid confidence sequence on paired episodes (their count in brackets); the certified "
            "minimum is the narrowest precision safe with every wider one safe too.</p>",
            table_html(verdicts, origins),
        ]
    if blocks:
        parts += [
            "<h2>Reward and E% per variant</h2>",
            "<p class='note'>E% = (R_fp32 − R_q) / |R_fp32| · 100, from each row's own fp32 reference row.</p>",
            f"<label>Variant <select id='variant'>{''.join(options)}</select></label>",
            *blocks,
        ]
    for title, stem, prefixes in SECTIONS:
        table = out_dir / f"{stem}.csv" if stem else None
        figures = section_figures(out_dir, prefixes)
        if not (table is not None and table.is_file()) and not figures:
            continue
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if table is not None and table.is_file():
            parts.append(table_html(table, origins))
        parts += [figure_html(figure) for figure in figures]
    claimed = {prefix for _, _, prefixes in SECTIONS for prefix in prefixes}
    unclaimed = [f for f in section_figures(out_dir, ("",)) if not f.name.startswith(tuple(claimed))]
    if unclaimed:  # a figure family no section names yet still reaches the page
        parts += ["<h2>More figures</h2>", *(figure_html(figure) for figure in unclaimed)]
    if blocks:
        parts.append(f"<script>{SCRIPT}</script>")
    parts.append("</body></html>")
    path = out_dir / "report.html"
    path.write_text("\n".join(parts))
    return path
