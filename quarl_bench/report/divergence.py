"""Closed-loop fidelity report: per agent, the distribution of the step where a quantized policy's trajectory parts
from the fp32 one's (``quarl-bench fidelity`` rows), one curve per precision."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from quarl_bench.agent_names import name_of
from quarl_bench.precision import precision_bits
from quarl_bench.report.objects import Figure, Table
from quarl_bench.types import file_name


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
                "precision": row["precision"],
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
            curves.append((row["precision"], grid, [(steps <= t).sum() / row["episodes"] for t in grid]))
        title = f"{name_of(group.iloc[0])}: threshold {threshold:g}, obs noise {noise:g}"
        suffix = f"_noise{noise:g}" if noise else ""
        name = f"fidelity_{algo}_{file_name(env_id)}{suffix}"
        items.append(Figure(name, SECTION, draw_fidelity, (curves, title), 120, tuple(group["job_key"])))
    return items


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
