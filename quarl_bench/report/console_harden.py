"""``quarl-bench harden`` on the console: what a hardening did, and the study's table (the report's own frame)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from rich.markup import escape
from rich.table import Table

SHOWN = (
    "parent",
    "recipe",
    "env steps",
    "fine-tune s",
    "before",
    "after",
    "target before",
    "target after",
    "fp32 vs parent",
    "margin median before",
    "margin median after",
)


def hardened_lines(row: dict[str, Any]) -> list[str]:
    """What a hardening did: where the agent went, its cost, and margins and weight spread before -> after."""
    before, after = row["before"], row["after"]
    lines = [
        f"Hardened agent: {escape(row['path'])} (hash {row['agent_hash']}, parent {row['parent_hash']})",
        f"  {row['recipe']}: {row['env_steps']} env steps (budget {row['budget']}), {row['gradient_steps']} "
        f"gradient steps, {row['seconds']:.1f} s",
        f"  weights: range {before['weights']['range']:.2f} -> {after['weights']['range']:.2f}, excess kurtosis "
        f"{before['weights']['kurtosis']:.1f} -> {after['weights']['kurtosis']:.1f}",
    ]
    module = Path(row["path"]).with_suffix("") / "module.py"
    if str(row["path"]).endswith(".onnx") and module.is_file():
        lines.append(f"  as a torch module too: --policy-module {escape(str(module))}:make (for c-int8, c-int4)")
    if before.get("margins") and after.get("margins"):
        lines.append(
            f"  decision margins (median top-2 gap on the parent's fixed states): "
            f"{before['margins']['margin_median']:.4g} -> {after['margins']['margin_median']:.4g}"
        )
    return lines


def study_table(frame: pd.DataFrame, title: str = "Hardened agents") -> Table:
    """The hardened-agents frame (``report/hardened.py``), its main columns."""
    table = Table(title=title)
    ladders = {f"{label} {side}" for label in set(frame["ladder"]) for side in ("before", "after")}
    ordered = [c for c in frame.columns if c in SHOWN or c in ladders]
    for column in ordered:
        table.add_column(column)
    for _, row in frame.iterrows():
        table.add_row(*(_text(row[c]) for c in ordered))
    return table


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):  # no figure: a dash, never None or nan
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return escape(str(value))
