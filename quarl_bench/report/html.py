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
from quarl_bench.store import ResultStore, Variant

# (title, table file stem in the report folder, figure file prefixes): a section appears when any of them exists
SECTIONS = (
    ("Minimum safe bits", "minimum_safe_bits", ()),
    ("Sweet spot: reward against bits", None, ("sweetspot_",)),
    ("Weight distributions", "weight_spread_vs_error", ("weights_",)),
    ("Quantization methods", "methods_safe_width", ("wa_heatmap", "compression_frontier")),
    ("Deployment", "deployment", ("deployment_",)),
    ("QuaRL Table 4: deployment latency", "table4", ()),
    ("ActorQ", "actorq_speedup", ("actorq_",)),
    ("Quantized rollouts", "rollout_final", ("rollout_",)),
    ("Paper vs measured", "paper_vs_measured", ()),
)
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
td:first-child, td:nth-child(2), td:nth-child(3) { text-align: left; }
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
                "action agreement": row["agreement"].get("action_agreement"),  # discrete actions
                "action rel. error": row["agreement"].get("action_rel_error"),  # continuous actions
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


def table_html(path: Path) -> str:
    """A report table (its CSV) as HTML."""
    frame = pd.read_csv(path)
    return frame.to_html(index=False, na_rep="–", float_format=lambda v: f"{v:.4g}", border=0, escape=True)


def figure_html(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'


def write_html_report(store: ResultStore, out_dir: Path, rows: int) -> Path:
    """``report.html`` in ``out_dir``, from the store (``rows`` of them) and the report files already written there."""
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
        f"<p class='note'>Store <code>{html.escape(str(store.path))}</code>, {rows} rows; "
        f"written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. Hover a line for the stored row it shows.</p>",
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
        figures = sorted(p for prefix in prefixes for p in out_dir.glob(f"{prefix}*.png"))
        if not (table is not None and table.is_file()) and not figures:
            continue
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if table is not None and table.is_file():
            parts.append(table_html(table))
        parts += [figure_html(figure) for figure in figures]
    if blocks:
        parts.append(f"<script>{SCRIPT}</script>")
    parts.append("</body></html>")
    path = out_dir / "report.html"
    path.write_text("\n".join(parts))
    return path
