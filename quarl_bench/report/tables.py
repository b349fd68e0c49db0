"""The reward-error table in QuaRL's Table 2 layout, as a DataFrame and as Markdown, LaTeX and CSV."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from quarl_bench.report.stats import bootstrap_ci

TABLE_PRECISIONS = ("fp16", "int8")


def reward_error_table(results: pd.DataFrame, method: str = "ptq") -> pd.DataFrame:
    """Rows: env, then ``Mean`` (mean E% per algo); columns: (algo, fp32 Rwd / fp16 Rwd / E_fp16 % / ...).

    Rewards are ``mean [95% CI]`` strings in the text outputs; the DataFrame keeps numbers.
    Only seed-0 rows of ``method`` are used (one cell per algo/env/precision).
    """
    frame = results[(results["method"] == method) | (results["precision"] == "fp32")]
    frame = frame.sort_values("created_at").drop_duplicates(["algo", "env_id", "precision"], keep="last")
    records = []
    for (algo, env_id), group in frame.groupby(["algo", "env_id"]):
        by_precision = group.set_index("precision")
        if "fp32" not in by_precision.index:
            continue
        record = {"algo": algo, "env": env_id, "fp32 Rwd": by_precision.loc["fp32", "mean_reward"]}
        low, high = bootstrap_ci(by_precision.loc["fp32", "episode_rewards"])
        record["fp32 CI"] = f"[{low:.1f}, {high:.1f}]"
        for precision in TABLE_PRECISIONS:
            if precision not in by_precision.index:
                continue
            row = by_precision.loc[precision]
            low, high = bootstrap_ci(row["episode_rewards"])
            record[f"{precision} Rwd"] = row["mean_reward"]
            record[f"{precision} CI"] = f"[{low:.1f}, {high:.1f}]"
            record[f"E_{precision} %"] = row["error_pct"]
            record[f"{precision} agree"] = row["agreement"].get("action_agreement", float("nan"))
        records.append(record)
    table = pd.DataFrame.from_records(records)
    if table.empty:
        return table
    metrics = [c for c in table.columns if c not in ("algo", "env")]
    error_columns = [c for c in metrics if c.startswith("E_")]
    means = table.groupby("algo")[error_columns].mean().reset_index().assign(env="Mean")
    long = pd.concat([table, means], ignore_index=True).set_index(["env", "algo"])
    wide = long.unstack("algo").swaplevel(axis=1)  # columns: (algo, metric), as in the paper
    algos = sorted(table["algo"].unique())
    wide = wide.reindex(columns=pd.MultiIndex.from_product([algos, metrics]))
    envs = sorted(set(table["env"]))
    return wide.reindex([*envs, "Mean"])


def write_reward_error_table(table: pd.DataFrame, out_dir: Path) -> list[Path]:
    """``reward_error_table.{md,tex,csv}`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"reward_error_table.{ext}" for ext in ("md", "tex", "csv")]
    table.to_csv(paths[2])
    text = table.round(2).astype(object).where(table.notna(), "")
    flat = text.copy()
    flat.columns = [f"{algo} {metric}" for algo, metric in text.columns]
    paths[0].write_text(flat.to_markdown() + "\n")
    paths[1].write_text(text.to_latex() + "\n")
    return paths
