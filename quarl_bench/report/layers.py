"""Per-layer results: the sensitivity heatmap (one acting layer quantized at a time) and the Pareto front of mixed
allocations against uniform PTQ (acting bytes vs reward with CIs). Reads stored rows only."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from quarl_bench.precision import precision_bits
from quarl_bench.report.estimators import stratified_bootstrap_ci
from quarl_bench.report.objects import Figure, Table, keys_in
from quarl_bench.report.statistics import uniform_default_ptq
from quarl_bench.store.agent_names import name_of
from quarl_bench.store.question import LAYERS, SEED, sibling_question, with_questions
from quarl_bench.types import file_name


def _quantized_layer(row: pd.Series) -> tuple[int, str] | None:
    """(layer index, precision) of a row with exactly one non-fp32 layer; None otherwise."""
    if not row["layer_bits"]:
        return None
    bits = json.loads(row["layer_bits"])
    others = [i for i, p in enumerate(bits) if p != "fp32"]
    return (others[0], bits[others[0]]) if len(others) == 1 else None


def sensitivity_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per agent cell x layer x precision: E%, agreement, margin change and flips, means over seeds, with
    the layer's name (from the row's quantized tensor) and the keys of the rows."""
    if frame.empty:
        return pd.DataFrame()
    records = []
    # a heatmap's question sums over the layer allocations (and seeds): one per agent and everything else
    rows = with_questions(frame[(frame["method"] == "ptq") & (frame["layer_bits"] != "")], over=(LAYERS, SEED))
    for _, row in rows.iterrows():
        found = _quantized_layer(row)
        if found is None:
            continue
        layer, precision = found
        name = row["layers"][0]["name"].removesuffix(".weight") if row["layers"] else f"layer {layer}"
        records.append(
            {
                "question": row["question"],
                "condition": row["question label"],
                "algo": row["algo"],
                "env_id": row["env_id"],
                "agent_hash": row["agent_hash"],
                "agent": name_of(row),
                "layer": layer,
                "name": name,
                "precision": precision,
                "bits": precision_bits(precision),
                "seed": row["seed"],
                "E %": row["error_pct"],
                "agreement": row["agreement"].get("action_agreement", np.nan),
                "margin change": row["agreement"].get("margin_change_median", np.nan),
                "state flips": row["agreement"].get("state_flips", np.nan),
                "key": row["key"],
            }
        )
    if not records:
        return pd.DataFrame()
    table = pd.DataFrame.from_records(records)
    cell = ["question", "condition", "algo", "env_id", "agent_hash", "agent", "layer", "name", "precision", "bits"]
    grouped = table.groupby(cell, dropna=False)
    means = grouped[["E %", "agreement", "margin change", "state flips"]].mean()
    means["seeds"] = grouped["seed"].apply(lambda s: len(set(s)))
    means["seed list"] = grouped["seed"].apply(lambda s: " ".join(map(str, sorted(s))))
    means["rows"] = grouped["key"].apply(" ".join)
    return means.reset_index().sort_values(["algo", "env_id", "layer", "bits"], ascending=[True, True, True, False])


def pareto_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per agent cell with a ``mixed`` row: the mixed allocation(s) and the uniform PTQ rows (fp32 included) on the
    same seeds; acting bytes and the mean reward with a stratified bootstrap CI over those seeds."""
    if frame.empty or not (frame["method"] == "mixed").any():
        return pd.DataFrame()
    records = []
    uniform_rows = with_questions(uniform_default_ptq(frame))
    for _, mixed in with_questions(frame[frame["method"] == "mixed"], over=(SEED,)).groupby("question"):
        seeds = set(mixed["seed"])
        front = sibling_question(mixed.iloc[0], "ptq")  # the same question, uniform PTQ at each precision
        uniform = uniform_rows[uniform_rows["question"] == front]
        uniform = uniform[uniform["seed"].isin(seeds)]
        for (method, precision, layer_bits), group in pd.concat([mixed, uniform]).groupby(
            ["method", "precision", "layer_bits"]
        ):
            if set(group["seed"]) != seeds:
                continue  # a point on the front needs the same seeds as the mixed row
            strata = [list(r) for r in group.sort_values("seed")["episode_rewards"]]
            mean, low, high = stratified_bootstrap_ci(strata, np.mean)
            allocation = "/".join(json.loads(layer_bits)) if layer_bits else precision
            label = f"mixed {allocation}" if method == "mixed" else precision
            records.append(
                {
                    "algo": group["algo"].iloc[0],
                    "env": group["env_id"].iloc[0],
                    "agent": name_of(group.iloc[0]),
                    "question": front,
                    "condition": mixed["question label"].iloc[0] if method == "mixed" else "uniform PTQ",
                    "policy": label,
                    "method": method,
                    "acting bytes": group["weights"].iloc[0].get("acting_bytes", np.nan),
                    "mean reward": mean,
                    "CI low": low,
                    "CI high": high,
                    "seeds": len(seeds),
                    "seed list": " ".join(map(str, sorted(seeds))),
                    "rows": " ".join(group["key"]),
                }
            )
    if not records:
        return pd.DataFrame()
    return pd.DataFrame.from_records(records).drop_duplicates(["question", "policy", "seed list"])


def layer_report(frame: pd.DataFrame) -> list[Table | Figure]:
    """``sensitivity`` with a heatmap per agent, ``mixed_pareto`` with a front per agent."""
    items: list[Table | Figure] = []
    sensitivity = sensitivity_frame(frame)
    if len(sensitivity):
        items.append(Table("sensitivity", "Per-layer sensitivity", sensitivity, decimals=4))
        questions = sensitivity.groupby("question", sort=False)
        for number, (_question, group) in enumerate(questions):
            algo, env_id, condition = group["algo"].iloc[0], group["env_id"].iloc[0], group["condition"].iloc[0]
            grid = group.pivot_table(index="name", columns="bits", values="E %").sort_index(axis=1, ascending=False)
            shown = "" if condition == "nominal" else f" ({condition})"
            title = f"{algo} {env_id} {name_of(group.iloc[0])}{shown}: one layer quantized"
            name = f"sensitivity_{algo}_{file_name(env_id)}" + (f"_{number}" if number else "")
            keys = keys_in(value for column in group.columns for value in group[column])
            items.append(Figure(name, "Per-layer sensitivity", draw_sensitivity, (grid, title), 120, keys))
    pareto = pareto_frame(frame)
    if len(pareto):
        items.append(Table("mixed_pareto", "Mixed precision", pareto))
        for number, (_front, group) in enumerate(pareto.groupby("question", sort=False)):
            algo, env_id, agent = group["algo"].iloc[0], group["env"].iloc[0], group["agent"].iloc[0]
            name = f"mixed_pareto_{algo}_{file_name(env_id)}" + (f"_{number}" if number else "")
            keys = keys_in(value for column in group.columns for value in group[column])
            items.append(Figure(name, "Mixed precision", draw_pareto, (algo, env_id, agent, group), 120, keys))
    return items


def draw_sensitivity(grid: pd.DataFrame, title: str) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.2 * len(grid.columns) + 3, 0.6 * len(grid) + 1.5))
    image = ax.imshow(grid.to_numpy(dtype=float), cmap="Reds", aspect="auto")
    ax.set_xticks(range(len(grid.columns)), [f"{b} bits" for b in grid.columns])
    ax.set_yticks(range(len(grid)), list(grid.index))
    for (i, j), value in np.ndenumerate(grid.to_numpy(dtype=float)):
        ax.text(j, i, f"{value:.0f}", ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, label="E % (others fp32)")
    ax.set_title(title, wrap=True)
    fig.tight_layout()
    return fig


def draw_pareto(algo: str, env_id: str, agent: str, group: pd.DataFrame) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for method, points in group.groupby("method"):
        points = points.sort_values("acting bytes")
        errors = [points["mean reward"] - points["CI low"], points["CI high"] - points["mean reward"]]
        ax.errorbar(
            points["acting bytes"],
            points["mean reward"],
            yerr=errors,
            marker="o" if method == "ptq" else "*",
            markersize=6 if method == "ptq" else 12,
            linestyle="-" if method == "ptq" else "",
            label="uniform PTQ" if method == "ptq" else "mixed (found)",
            capsize=3,
        )
        for _, point in points.iterrows():
            ax.annotate(
                point["policy"],
                (point["acting bytes"], point["mean reward"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.set_xlabel("acting-network bytes")
    ax.set_ylabel("mean reward (95% CI over verify seeds)")
    ax.set_title(f"{algo} {env_id} ({agent}): size vs reward")
    ax.legend()
    fig.tight_layout()
    return fig
