"""Closed-loop fidelity report: per agent, the distribution of the step where a quantized policy's trajectory parts
from the fp32 one's (``quarl-bench fidelity`` rows), one curve per precision; and the error per step of the episode
on fp32's trajectories (flip rate or action error, and a recurrent policy's hidden-state error)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from quarl_bench.precision import precision_bits
from quarl_bench.report.objects import Figure, Table
from quarl_bench.store.agent_names import name_of
from quarl_bench.types import file_name


def spec_label(row: pd.Series) -> str:
    """The quantized policy's precision and recipe (``int4 h8 cal-minmax1000``); the precision for rows stored
    before the label was."""
    return row["over_time"].get("label") or row["precision"]


def fidelity_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per stored fidelity row: episodes parted and median first divergence steps (never: not counted)."""
    records = []
    for _, row in rows.iterrows():
        actions = [s for s in row["first_action"] if s is not None]
        observations = [s for s in row["first_obs"] if s is not None]
        records.append(
            {
                "algo": row["algo"],
                "env": row["env_id"],
                "agent": name_of(row),
                "precision": spec_label(row),
                "seed": row["seed"],
                "episodes": row["episodes"],
                "threshold": row["threshold"],
                "obs noise": row["obs_noise"],
                "actions differ": len(actions),
                "median first action step": np.median(actions) if actions else np.nan,
                "trajectories part": len(observations),
                "median first obs step": np.median(observations) if observations else np.nan,
                "median fp32 length": float(np.median(row["lengths"])),
                "row": row["key"],
            }
        )
    return pd.DataFrame.from_records(records)


def fidelity_report(rows: pd.DataFrame) -> list[Table | Figure]:
    """``fidelity`` and per agent and setting a figure: the share of episodes whose trajectories have parted by
    step t, per precision."""
    if rows.empty:
        return []
    items: list[Table | Figure] = [Table("fidelity", SECTION, fidelity_summary(rows))]
    groups = rows.groupby(["algo", "env_id", "agent_hash", "seed", "episodes", "threshold", "obs_noise"])
    for (algo, env_id, _agent, _seed, _episodes, threshold, noise), group in groups:
        curves = []
        for _, row in group.sort_values("precision", key=lambda s: -s.map(precision_bits)).iterrows():
            steps = np.array([s for s in row["first_obs"] if s is not None], dtype=float)
            horizon = max(row["lengths"]) if row["lengths"] else 1
            grid = np.arange(horizon + 1)
            curves.append((spec_label(row), grid, [(steps <= t).sum() / row["episodes"] for t in grid]))
        title = f"{name_of(group.iloc[0])}: threshold {threshold:g}, obs noise {noise:g}"
        suffix = f"_noise{noise:g}" if noise else ""
        name = f"fidelity_{algo}_{file_name(env_id)}{suffix}"
        items.append(Figure(name, SECTION, draw_fidelity, (curves, title), 120, tuple(group["job_key"])))
        timed = [row for _, row in group.iterrows() if row["over_time"].get("alive")]
        if timed:
            items.append(over_time_figure(timed, f"fidelity_over_time_{algo}_{file_name(env_id)}{suffix}", title))
    return items


OVER_TIME_BINS = 50  # points per curve: steps are averaged in bins of horizon / 50


def over_time_figure(rows: list[pd.Series], name: str, title: str) -> Figure:
    """Per step of the episode on fp32 trajectories: the flip rate (continuous: the action error as a share of the
    range) and, for a recurrent policy, the hidden-state error, one line per quantized policy."""
    from quarl_bench.evaluation.fidelity_over_time import per_step_rates

    horizon = max(len(row["over_time"]["alive"]) for row in rows)
    width = max(1, -(-horizon // OVER_TIME_BINS))
    curves = []
    for row in rows:
        steps = row["over_time"]
        what = "action_error" if steps["action_error"] else "flips"
        label = spec_label(row)
        hidden = per_step_rates(steps, "hidden_error", width) if steps["hidden_error"] else None
        curves.append((label, what, per_step_rates(steps, what, width), hidden))
    return Figure(name, SECTION, draw_over_time, (curves, title), 120, tuple(row["key"] for row in rows))


SECTION = "Closed-loop fidelity"


def draw_fidelity(curves: list[tuple[str, np.ndarray, list[float]]], title: str) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for precision, grid, parted in curves:
        ax.step(grid, parted, where="post", label=precision)
    ax.set_xlabel("step")
    ax.set_ylabel("share of episodes parted from fp32")
    ax.set_title(title, wrap=True)
    ax.legend()
    fig.tight_layout()
    return fig


def draw_over_time(curves: list[tuple], title: str) -> Any:
    import matplotlib.pyplot as plt

    recurrent = any(hidden is not None for *_, hidden in curves)
    fig, axes = plt.subplots(1, 2 if recurrent else 1, figsize=(10 if recurrent else 6, 4), squeeze=False)
    for label, _what, (steps, rates), hidden in curves:
        axes[0][0].plot(steps, rates, label=label)
        if hidden is not None:
            axes[0][1].plot(*hidden, label=label)
    what = curves[0][1]
    axes[0][0].set_ylabel("action flip rate" if what == "flips" else "action error (share of range)")
    axes[0][0].set_xlabel("step within the episode (fp32 trajectory)")
    axes[0][0].legend()
    if recurrent:
        axes[0][1].set_ylabel("mean |h_q - h_fp32|")
        axes[0][1].set_xlabel("step within the episode (fp32 trajectory)")
    fig.suptitle(title + ": error per step, on fp32's trajectories", wrap=True)
    fig.tight_layout()
    return fig
