"""``quarl-bench results``: the stored rows as a console table, one line a row, with its condition and, where the env
reported one, its successes."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from quarl_bench.report.console import format_number


def rows_table(frame: Any, title: str) -> Table:
    """``quarl-bench results``: the listed columns of a DataFrame of rows."""
    from quarl_bench.store.results import success_rate

    columns = ("algo", "env_id", "method", "precision", "mean_reward", "std_reward", "error_pct", "episodes", "seed")
    successes = "episode_outcomes" in frame and any(
        success_rate(o) == success_rate(o) for o in frame["episode_outcomes"]
    )
    table = Table(title=title)
    for column in (*columns[:4], "recipe", "condition", *columns[4:], *(["success"] if successes else [])):
        table.add_column(column)
    for _, row in frame.iterrows():
        cells = [format_number(row[c], "{:.2f}") if isinstance(row[c], float) else str(row[c]) for c in columns]
        condition = str(row.get("perturbation") or "") or (
            f"obs noise {row['obs_noise']:g}" if row.get("obs_noise") else "nominal"
        )
        extra = [_success_cell(row.get("episode_outcomes"))] if successes else []
        table.add_row(*cells[:4], recipe_text(row), condition, *cells[4:], *extra)
    return table


def _success_cell(outcomes: Any) -> str:
    """``37/40`` successes of a row ('-' where none was recorded)."""
    values = outcomes.get("success") if isinstance(outcomes, dict) else None
    return f"{int(sum(values))}/{len(values)}" if values else "-"


def recipe_text(row: Any) -> str:
    """What else made the row besides its precision: the PTQ recipe, or a rollout run's correction (``tis-c2``)."""
    if row.get("method") == "rollout":
        return str(row.get("setting", "")).split("/", 1)[-1]
    return str(row.get("recipe") or "")
