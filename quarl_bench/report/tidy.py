"""The reward-error table in the shapes a paper and a terminal can use: tidy (one row per agent and precision,
numbers only, CIs as two numeric columns), and compact (one line per agent, E % per precision: fits 120
columns however many agents a store holds)."""

from __future__ import annotations

import pandas as pd

from quarl_bench.precision import precision_bits
from quarl_bench.report.estimators import bootstrap_ci
from quarl_bench.report.objects import Table
from quarl_bench.report.tables import cell_labels

SECTION = "Reward and E% per variant"
PREFERRED = ("fp16", "int8", "int6", "int4", "int2", "bf16")
COMPACT_PRECISIONS = 6  # columns of E % the compact table shows: with env, algo and fp32 it fits 120 columns


def reward_error_tidy(selected: pd.DataFrame) -> pd.DataFrame:
    """One row per stored row of one variant (``ResultStore.select``): env, algo, agent, precision, reward with its
    95% bootstrap CI, E % against its own fp32 row, fixed-state flips, agreement, episodes and the row key."""
    if selected.empty:
        return pd.DataFrame()
    labels = cell_labels(selected)
    records = []
    for row in selected.to_dict("records"):
        low, high = bootstrap_ci(row["episode_rewards"])
        agreement = row.get("agreement") or {}
        records.append(
            {
                "env": labels.get(row["reference_key"], row["env_id"]),
                "algo": row["algo"],
                "agent": row.get("agent", ""),
                "precision": row["precision"],
                "reward": row["mean_reward"],
                "reward CI low": low,
                "reward CI high": high,
                "E %": 0.0 if row["precision"] == "fp32" else row["error_pct"],
                "fixed-state flips": agreement.get("fixed_flip_rate"),
                "agreement": agreement.get("action_agreement"),
                "episodes": int(row["episodes"]),
                "row key": row["key"],
            }
        )
    frame = pd.DataFrame.from_records(records)
    frame["_bits"] = frame["precision"].map(lambda p: -precision_bits(p))
    return frame.sort_values(["env", "algo", "_bits"]).drop(columns="_bits").reset_index(drop=True)


def reward_error_compact(tidy: pd.DataFrame) -> pd.DataFrame:
    """One line per agent: env, algo, the fp32 reward, then E % per precision (widest first)."""
    if tidy.empty:
        return pd.DataFrame()
    quantized = tidy[tidy["precision"] != "fp32"]
    # the most measured precisions (at most COMPACT_PRECISIONS, widest first): a sweet-spot grid's 16 widths stay in
    # the tidy file
    counts = quantized["precision"].value_counts()

    def rank(precision: str) -> tuple:  # most measured first; among equals the widths the papers report
        named = PREFERRED.index(precision) if precision in PREFERRED else len(PREFERRED)
        return (-counts[precision], named, -precision_bits(precision))

    kept = sorted(counts.index, key=rank)[:COMPACT_PRECISIONS]
    precisions = sorted(kept, key=lambda p: -precision_bits(p))
    errors = quantized.pivot_table(index=["env", "algo"], columns="precision", values="E %", aggfunc="first")
    fp32 = tidy[tidy["precision"] == "fp32"].groupby(["env", "algo"])["reward"].first().rename("fp32 reward")
    compact = pd.concat([fp32, errors.reindex(columns=precisions)], axis=1)
    compact.columns = ["fp32 reward", *(f"E% {p}" for p in precisions)]
    return compact.reset_index()


def reward_error_shapes(selected: pd.DataFrame, suffix: str = "", label: str = "") -> list[Table]:
    """The tidy table (CSV for analysis) and the compact one (the console's)."""
    tidy = reward_error_tidy(selected)
    if tidy.empty:
        return []
    caption = f"E % per agent and precision, variant: {label or 'default'} (rewards and CIs: reward_error_tidy{suffix})"
    return [
        Table(f"reward_error_tidy{suffix}", SECTION, tidy, "One row per agent and precision", on_page=False),
        Table(
            f"reward_error_summary{suffix}", SECTION, reward_error_compact(tidy), caption, on_page=False, console=True
        ),
    ]
