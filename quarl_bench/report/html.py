"""``quarl-bench report --html``: one self-contained page of the report, figures embedded, no network needed.

The reward-error rows of every variant, one table per variant behind a selector, each row carrying the stored row it
is (key, command, commit); then the report's own tables and figures, section by section, for what the store holds.
"""

from __future__ import annotations

import base64
import html
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from quarl_bench.report.estimators import bootstrap_ci
from quarl_bench.report.objects import CELL_ROWS_SUFFIX, ROW_COLUMNS, SECTIONS, Figure, Item, Table, keys_in
from quarl_bench.store import ResultStore, Variant
from quarl_bench.store.agent_names import name_of

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
    ordered = selected.sort_values(["algo", "env_id", "bits"], ascending=[True, True, False])
    for row in ordered.to_dict("records"):
        low, high = bootstrap_ci(row["episode_rewards"])
        provenance = row["provenance"]
        records.append(
            {
                "algo": row["algo"],
                "env": row["env_id"],
                "agent": name_of(row),  # a parent zip and its hardened child share algo and env
                "precision": row["precision"],
                "reward": row["mean_reward"],
                "95% CI": f"[{low:.1f}, {high:.1f}]",
                "fp32 reward": row.get("fp32_reward"),
                "E %": row["error_pct"],
                # on one fixed set of fp32-visited states, the same for every width (evaluation/fixed_states.py)
                # rates in % on the page, as on the console
                "flips %, fp32 states": _percent(row["agreement"].get("fixed_flip_rate")),  # discrete actions
                "flips %, near-ties": _percent(row["agreement"].get("fixed_flip_near_tie")),
                "flips %, clear": _percent(row["agreement"].get("fixed_flip_clear")),
                "action error, % of range, fp32 states": _percent(row["agreement"].get("fixed_action_range_error")),
                # on the states each policy visits itself: not comparable across widths
                "same actions %, own states": _percent(row["agreement"].get("action_agreement")),
                "episodes": row["episodes"],
                "_key": row["key"],
                "_command": provenance.get("command", ""),
                "_commit": provenance.get("git_commit", ""),
            }
        )
    return pd.DataFrame.from_records(records)


def _percent(share: float | None) -> float | None:
    return None if share is None else 100 * share


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
    return list(keys_in([text]))


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


def table_html(frame: pd.DataFrame, origins: dict[str, tuple[str, str]]) -> str:
    """A report table as HTML whose cells name the stored rows behind them (keys, command, commit) in a tooltip: a
    line's ``rows``/``row key`` column covers the line; column "X rows" covers column X's cell."""
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


def figure_html(figure: Figure, out_dir: Path, formats: tuple[str, ...]) -> str:
    """A figure as an embedded image: its SVG where the report wrote one, else its PNG, else where its files are."""
    for ext, mime in (("svg", "image/svg+xml"), ("png", "image/png")):
        if ext in formats:
            data = base64.b64encode((out_dir / f"{figure.name}.{ext}").read_bytes()).decode()
            return f'<figure><img alt="{html.escape(figure.name)}" src="data:{mime};base64,{data}"></figure>'
    written = ", ".join(f"{figure.name}.{ext}" for ext in formats)
    return f"<p class='note'>Figure {html.escape(figure.name)}: written as {html.escape(written)}.</p>"


def write_html_report(
    store: ResultStore,
    items: list[Item],
    out_dir: Path,
    formats: tuple[str, ...] = ("svg", "png"),
    selected: dict[Variant, pd.DataFrame] | None = None,
    results: pd.DataFrame | None = None,
) -> Path:
    """``report.html`` in ``out_dir``: the report's objects section by section (every figure; every table marked
    ``on_page``), after the reward rows of every variant, one stored row per line.

    :param selected: the PTQ variants' rows where the caller selected them already.
    :param results: every stored row, where the caller read them already.
    """
    results = store.to_dataframe() if results is None else results
    origins = row_origins(store, results)
    selected = selected or {}
    variants = store.variants("ptq") or [Variant()]
    options, blocks = [], []
    for i, variant in enumerate(variants):
        rows = variant_rows(selected[variant] if variant in selected else store.select(variant))
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
    shown = [item for item in items if item.on_page]
    sections = list(dict.fromkeys([*SECTIONS, *(item.section for item in shown)]))
    for section in sections:
        members = [item for item in shown if item.section == section]
        if section == "Reward and E% per variant" and blocks:
            parts += [
                f"<h2>{html.escape(section)}</h2>",
                "<p class='note'>E% = (R_fp32 − R_q) / |R_fp32| · 100, from each row's own fp32 reference row.</p>",
                f"<label>Variant <select id='variant'>{''.join(options)}</select></label>",
                *blocks,
            ]
        if not members:
            continue
        if section != "Reward and E% per variant":
            parts.append(f"<h2>{html.escape(section)}</h2>")
        if section == "Certified verdicts":
            parts.append(VERDICT_NOTE)
        for item in members:
            if isinstance(item, Table):
                parts.append(table_html(item.frame, origins))
            else:
                parts.append(figure_html(item, out_dir, formats))
    if blocks:
        parts.append(f"<script>{SCRIPT}</script>")
    parts.append("</body></html>")
    path = out_dir / "report.html"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))
    return path


VERDICT_NOTE = (
    "<p class='note'>Per agent and precision: safe, unsafe or undetermined against the tolerance δ, decided by a "
    "confidence sequence on paired episodes (their count in brackets); the certified minimum is the narrowest "
    "precision safe with every wider one safe too. The guarantee column says what each line carries: "
    "<b>finite-sample</b> (a betting sequence on known or declared return bounds, valid at every look) or "
    "<b>asymptotic</b> (a normal-approximation sequence, valid only as the pairs grow; no finite-sample claim).</p>"
)
