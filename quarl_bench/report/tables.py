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
    frame = results[results["method"] == method]
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


SPREAD_METRICS = ("std", "range", "kurtosis")


def weight_spread_table(results: pd.DataFrame, precision: str = "int8") -> pd.DataFrame:
    """Per agent: the spread of its fp32 acting weights next to its E% at ``precision``."""
    frame = results[results["method"] == "ptq"].sort_values("created_at")
    frame = frame.drop_duplicates(["algo", "env_id", "precision"], keep="last")
    records = []
    for (algo, env_id), group in frame.groupby(["algo", "env_id"]):
        quantized = group[group["precision"] == precision]
        profile = group["weights"].iloc[-1]
        if quantized.empty or not profile:
            continue
        record = {"algo": algo, "env": env_id, **{m: profile[m] for m in SPREAD_METRICS}}
        record[f"E_{precision} %"] = quantized["error_pct"].iloc[0]
        records.append(record)
    return pd.DataFrame.from_records(records)


def spread_error_correlation(table: pd.DataFrame, precision: str = "int8") -> pd.DataFrame:
    """Pearson and Spearman correlation of each spread metric with E% (QuaRL: wider spread, worse error)."""
    from scipy import stats

    error = table[f"E_{precision} %"]
    rows = []
    for metric in SPREAD_METRICS:
        valid = table[metric].notna() & error.notna()
        if valid.sum() < 3 or table.loc[valid, metric].nunique() < 2 or error[valid].nunique() < 2:
            rows.append({"metric": metric, "n": int(valid.sum())})
            continue
        pearson = stats.pearsonr(table.loc[valid, metric], error[valid])
        spearman = stats.spearmanr(table.loc[valid, metric], error[valid])
        rows.append({
            "metric": metric,
            "n": int(valid.sum()),
            "pearson_r": pearson.statistic,
            "pearson_p": pearson.pvalue,
            "spearman_rho": spearman.statistic,
            "spearman_p": spearman.pvalue,
        })  # fmt: skip
    return pd.DataFrame(rows)


def write_weight_spread(results: pd.DataFrame, out_dir: Path) -> list[Path]:
    """``weight_spread_vs_error.{md,csv}``: the per-agent table, then the correlations."""
    table = weight_spread_table(results)
    if table.empty:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    correlation = spread_error_correlation(table)
    csv, md = out_dir / "weight_spread_vs_error.csv", out_dir / "weight_spread_vs_error.md"
    table.to_csv(csv, index=False)
    md.write_text(
        table.round(4).to_markdown(index=False)
        + "\n\nCorrelation of weight spread with E_int8 % across agents:\n\n"
        + correlation.round(3).to_markdown(index=False)
        + "\n"
    )
    return [csv, md]


def qat_vs_ptq_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per (algo, env, bits): PTQ reward of the fp32 agent, QAT reward (mean and std over training seeds), fp32.

    PTQ and fp32 rows are those of the newest non-QAT agent of the pair; QAT rows are their own agents' evaluations.
    """
    qat = results[(results["method"] == "qat") & results["precision"].str.startswith("int")]
    records = []
    for (algo, env_id), group in qat.groupby(["algo", "env_id"]):
        baseline = results[(results["algo"] == algo) & (results["env_id"] == env_id) & (results["method"] == "ptq")]
        baseline = baseline.sort_values("created_at")
        fp32 = baseline[baseline["precision"] == "fp32"]["mean_reward"]
        for bits, by_bits in group.groupby("bits"):
            ptq = baseline[baseline["bits"] == bits]["mean_reward"]
            records.append({
                "algo": algo,
                "env": env_id,
                "bits": int(bits),
                "fp32 Rwd": fp32.iloc[-1] if len(fp32) else float("nan"),
                "PTQ Rwd": ptq.iloc[-1] if len(ptq) else float("nan"),
                "QAT Rwd": by_bits["mean_reward"].mean(),
                "QAT std over seeds": by_bits["mean_reward"].std(ddof=0),
                "QAT seeds": len(by_bits),
            })  # fmt: skip
    return (
        pd.DataFrame.from_records(records).sort_values(["algo", "env", "bits"], ascending=[True, True, False])
        if records
        else pd.DataFrame()
    )


def write_table(table: pd.DataFrame, out_dir: Path, stem: str) -> list[Path]:
    """``stem.csv`` and ``stem.md`` (rounded to 2 decimals) of a flat table; nothing for an empty one."""
    if table.empty:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    csv, md = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    table.to_csv(csv, index=False)
    md.write_text(table.round(2).to_markdown(index=False) + "\n")
    return [csv, md]


def write_qat_vs_ptq(results: pd.DataFrame, out_dir: Path) -> list[Path]:
    return write_table(qat_vs_ptq_table(results), out_dir, "qat_vs_ptq")


def paper_vs_measured(results: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """QuaRL's published rewards and E% next to the measured ones, for the (algo, env) cells both have."""
    from quarl_bench.zoo.envs import resolve_env_id

    if reference.empty:
        return pd.DataFrame()
    measured = reward_error_table(results)
    rows = []
    for _, paper in reference.iterrows():
        env_id, algo = resolve_env_id(str(paper["env"])), str(paper["algo"]).lower()
        if env_id not in measured.index or (algo, "fp32 Rwd") not in measured.columns:
            continue
        ours = measured.loc[env_id, algo]
        if pd.isna(ours["fp32 Rwd"]):
            continue
        rows.append({
            "algo": algo,
            "env": env_id,
            "paper fp32": paper["fp32_reward"],
            "ours fp32": ours["fp32 Rwd"],
            "paper E_fp16 %": paper["e_fp16_pct"],
            "ours E_fp16 %": ours.get("E_fp16 %"),
            "paper E_int8 %": paper["e_int8_pct"],
            "ours E_int8 %": ours.get("E_int8 %"),
        })  # fmt: skip
    return pd.DataFrame(rows)


def write_paper_vs_measured(results: pd.DataFrame, reference_csv: Path, out_dir: Path) -> list[Path]:
    table = paper_vs_measured(results, pd.read_csv(reference_csv)) if reference_csv.is_file() else pd.DataFrame()
    return write_table(table, out_dir, "paper_vs_measured")


def amp_table(results: pd.DataFrame) -> pd.DataFrame:
    """Mixed-precision runs: ms per gradient update, speed-up over the fp32 run of the same policy size, reward."""
    runs = results[results["method"] == "amp"]
    records = [row["provenance"]["training"] | {"reward": row["mean_reward"]} for _, row in runs.iterrows()]
    if not records:
        return pd.DataFrame()
    frame = pd.DataFrame.from_records(records)
    keys = ["algo", "env_id", "arch", "n_timesteps", "seed"]
    base = frame[frame["dtype"] == "fp32"].set_index(keys)["ms_per_update"]
    frame["speed-up"] = [
        base.get(tuple(row[k] for k in keys), float("nan")) / row["ms_per_update"] for _, row in frame.iterrows()
    ]
    return frame[[*keys, "dtype", "ms_per_update", "updates", "speed-up", "reward"]].sort_values(keys + ["dtype"])


def write_amp_table(results: pd.DataFrame, out_dir: Path) -> list[Path]:
    return write_table(amp_table(results), out_dir, "amp_timing")
