"""Stored rows as a user reads them from Python: one flat frame, numeric columns, the same names whether it comes
from :func:`load_results`, ``evaluate_agent`` or ``certify_agent(...).frame()``."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from quarl_bench.store import DEFAULT_STORE, ResultStore

FIRST_COLUMNS = (
    "agent",
    "algo",
    "env_id",
    "method",
    "precision",
    "mean_reward",
    "std_reward",
    "fp32_reward",
    "E %",
    "fixed_flip_rate",
    "fixed_action_l2",
    "action_agreement",
    "success_rate",
    "episodes",
    "seed",
)
WEIGHT_FIGURES = ("acting_bytes", "nonzero_weights")  # the scalars of the ``weights`` profile


def load_results(path: str | os.PathLike = DEFAULT_STORE) -> pd.DataFrame:
    """Every row of the store at ``path``, oldest first, as :func:`results_frame` flattens it.

    :raises FileNotFoundError: when no store is there (nothing is created).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no results store at {str(path)!r}: expected a file quarl-bench wrote (default {DEFAULT_STORE})"
        )
    with ResultStore(path) as store:
        return results_frame(store.to_dataframe())


def success_rate(outcomes: object) -> float:
    """The share of a row's episodes that succeeded (NaN where no success was recorded)."""
    values = outcomes.get("success") if isinstance(outcomes, dict) else None
    return float(sum(values) / len(values)) if values else float("nan")


def as_text_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its list and dict cells as JSON (a CSV reader's: not Python's repr)."""
    import json

    shown = frame.copy()
    for column in shown.columns:
        if shown[column].map(lambda value: isinstance(value, dict | list | tuple)).any():
            shown[column] = shown[column].map(
                lambda value: json.dumps(value) if isinstance(value, dict | list | tuple) else value
            )
    return shown


def results_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with ``E %`` (E% against the row's fp32 reference), each agreement figure (``fixed_flip_rate``,
    ``action_agreement``, margins, ...) and weight figure as a column of its own; the headline columns first.
    Per-episode lists (``episode_rewards``, ``episode_ids``), ``layers`` and ``provenance`` stay for tracing."""
    if rows.empty:
        return rows.rename(columns={"error_pct": "E %"})
    agreement = pd.DataFrame([dict(a) for a in rows["agreement"]], index=rows.index)
    weights = pd.DataFrame(
        [{k: w.get(k) for k in WEIGHT_FIGURES} for w in rows["weights"]], index=rows.index, dtype=float
    )
    flat = pd.concat([rows.drop(columns=["agreement", "weights"]), agreement, weights], axis=1)
    flat = flat.rename(columns={"error_pct": "E %"})
    if "episode_outcomes" in flat.columns:  # a success rate where the env (or a judge) reported one
        flat["success_rate"] = [success_rate(outcomes) for outcomes in flat["episode_outcomes"]]
    for column in ("fixed_flip_rate", "fixed_action_l2", "action_agreement"):
        if column not in flat.columns:
            flat[column] = float("nan")
    first = [c for c in FIRST_COLUMNS if c in flat.columns]
    return flat[first + [c for c in flat.columns if c not in first]].reset_index(drop=True)
