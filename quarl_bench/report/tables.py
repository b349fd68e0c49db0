"""The reward-error table in QuaRL's Table 2 layout, as a DataFrame and as Markdown, LaTeX and CSV."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from quarl_bench.deploy.machine import device_units, load_text
from quarl_bench.report.estimators import bootstrap_ci
from quarl_bench.report.objects import Table
from quarl_bench.store.agent_names import ZOO_SOURCES, name_of
from quarl_bench.store.question import with_questions

TABLE_PRECISIONS = ("fp16", "int8")


def cell_labels(frame: pd.DataFrame) -> dict[str, str]:
    """A row label per reference key: the env id, plus what sets the cell apart when one algo/env has several
    (another agent; its question's label, store/question.py: env count, action mode, condition, ...); never
    merged."""
    references = frame[frame["key"] == frame["reference_key"]]
    missing = frame[~frame["reference_key"].isin(references["key"])].drop_duplicates("reference_key")
    cells = with_questions(pd.concat([references, missing.assign(key=missing["reference_key"])]))
    groups: dict[tuple[str, str], list[dict]] = {}  # (algo, env) -> its cells' first rows
    for row in cells.drop_duplicates("reference_key").to_dict("records"):
        groups.setdefault((row["algo"], row["env_id"]), []).append(row)
    labels: dict[str, str] = {}
    for (_algo, env_id), rows in groups.items():
        agents = len({row["agent_hash"] for row in rows}) > 1
        own_file = any(row.get("agent_source") not in ZOO_SOURCES for row in rows)
        for cell in rows:
            extra = [name_of(cell)] if agents or own_file else []
            extra += [cell["question label"]] if len(rows) > 1 and cell["question label"] != "nominal" else []
            labels[cell["reference_key"]] = f"{env_id} ({', '.join(extra)})" if extra else env_id
    return labels


def reward_error_table(selected: pd.DataFrame) -> pd.DataFrame:
    """QuaRL Table 2 layout from the rows of one variant (``ResultStore.select``).

    Rows: env, then ``Mean`` (mean E% per algo); columns: (algo, fp32 Rwd / fp16 Rwd / E_fp16 % / ...). Each cell is
    one reference row and the rows that name it as their reference (``reference_key``), so fp32 reward and E% come
    from the same fp32 row. Rewards are ``mean [95% CI]`` strings in the text outputs; the DataFrame keeps numbers.
    """
    if selected.empty:
        return pd.DataFrame()
    labels = cell_labels(selected)
    columns = ["reference_key", "precision", "algo", "mean_reward", "episode_rewards", "error_pct", "agreement"]
    cells: dict[str, dict[str, dict]] = {}  # reference key -> precision -> row (plain dicts: pandas per cell was slow)
    for row in selected[columns].to_dict("records"):
        cells.setdefault(row["reference_key"], {})[row["precision"]] = row
    records = []
    for reference_key, by_precision in sorted(cells.items()):
        if "fp32" not in by_precision:
            continue
        fp32 = by_precision["fp32"]
        record = {"algo": fp32["algo"], "env": labels[reference_key], "fp32 Rwd": fp32["mean_reward"]}
        low, high = bootstrap_ci(fp32["episode_rewards"])
        record["fp32 CI"] = f"[{low:.1f}, {high:.1f}]"
        for precision in TABLE_PRECISIONS:
            if precision not in by_precision:
                continue
            row = by_precision[precision]
            low, high = bootstrap_ci(row["episode_rewards"])
            record[f"{precision} Rwd"] = row["mean_reward"]
            record[f"{precision} CI"] = f"[{low:.1f}, {high:.1f}]"
            record[f"E_{precision} %"] = row["error_pct"]
            # flips on one fixed set of fp32-visited states (comparable across widths); agreement on its own states
            record[f"{precision} flips"] = row["agreement"].get("fixed_flip_rate", float("nan"))
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


def reward_error_report(table: pd.DataFrame, suffix: str = "", label: str = "") -> Table:
    """``reward_error_table{suffix}`` (.md, .tex, .csv); the Markdown names the variant (``label``). On the page,
    the variant selector shows the same rows one stored row per line."""
    text = table.round(2).astype(object).where(table.notna(), "")
    flat = text.copy()
    flat.columns = [f"{algo} {metric}" for algo, metric in text.columns]
    markdown = (f"Variant: {label}\n\n" if label else "") + flat.to_markdown() + "\n"
    caption = f"Reward-error table, variant: {label or 'default'}"
    return Table(
        f"reward_error_table{suffix}",
        "Reward and E% per variant",
        table,
        caption,
        markdown=markdown,
        latex=True,
        index=True,
        on_page=False,
    )


SPREAD_METRICS = ("std", "range", "kurtosis")
MARGIN_METRIC = "margin_median"  # the fp32 policy's median top-2 gap on the states it visited (margins.py)


def weight_spread_table(selected: pd.DataFrame, precision: str = "int8") -> pd.DataFrame:
    """Per cell of one variant: the spread of the agent's fp32 acting weights next to its E% at ``precision``."""
    if selected.empty:
        return pd.DataFrame()
    labels = cell_labels(selected)
    records = []
    for reference_key, cell in selected.groupby("reference_key"):
        fp32 = cell[cell["precision"] == "fp32"]
        quantized = cell[cell["precision"] == precision]
        if fp32.empty or quantized.empty or not fp32["weights"].iloc[0]:
            continue
        profile = fp32["weights"].iloc[0]
        record = {"algo": fp32["algo"].iloc[0], "env": labels[reference_key], **{m: profile[m] for m in SPREAD_METRICS}}
        record[MARGIN_METRIC] = fp32["agreement"].iloc[0].get(MARGIN_METRIC, float("nan"))
        record[f"E_{precision} %"] = quantized["error_pct"].iloc[0]
        record[f"{precision} flips %"] = 100 * (
            1 - quantized["agreement"].iloc[0].get("action_agreement", float("nan"))
        )
        records.append(record)
    return pd.DataFrame.from_records(records)


def spread_error_correlation(table: pd.DataFrame, precision: str = "int8") -> pd.DataFrame:
    """Pearson and Spearman correlation of each spread metric, and of the decision margin, with E% and with the
    share of greedy actions the precision flips (QuaRL: wider spread, worse error; margins: a policy that decides by
    a hair flips under small weight changes, which costs reward only where the task punishes it)."""
    from scipy import stats

    rows = []
    for target in (f"E_{precision} %", f"{precision} flips %"):
        outcome = table[target] if target in table else pd.Series(float("nan"), index=table.index)
        for metric in (*SPREAD_METRICS, MARGIN_METRIC):
            valid = table[metric].notna() & outcome.notna()
            row = {"metric": metric, "with": target, "n": int(valid.sum())}
            if valid.sum() >= 3 and table.loc[valid, metric].nunique() >= 2 and outcome[valid].nunique() >= 2:
                pearson = stats.pearsonr(table.loc[valid, metric], outcome[valid])
                spearman = stats.spearmanr(table.loc[valid, metric], outcome[valid])
                row |= {
                    "pearson_r": pearson.statistic,
                    "pearson_p": pearson.pvalue,
                    "spearman_rho": spearman.statistic,
                    "spearman_p": spearman.pvalue,
                }
            rows.append(row)
    return pd.DataFrame(rows)


def weight_spread_report(selected: pd.DataFrame) -> list[Table]:
    """``weight_spread_vs_error``: the per-agent table, then the correlations."""
    table = weight_spread_table(selected)
    if table.empty:
        return []
    correlation = spread_error_correlation(table)
    markdown = (
        table.round(4).to_markdown(index=False)
        + "\n\nmargin_median: the fp32 policy's median gap between its best and second-best action (Q-values or "
        "logits) on the states it visited; discrete-action agents only.\n\nCorrelation of weight spread and decision "
        "margin with E_int8 % and with the int8 flip rate across agents:\n\n"
        + correlation.round(3).to_markdown(index=False)
        + "\n"
    )
    return [Table("weight_spread_vs_error", "Weight distributions", table, markdown=markdown, decimals=4)]


def qat_vs_ptq_table(qat: pd.DataFrame, ptq: pd.DataFrame) -> pd.DataFrame:
    """Per (algo, env, precision): the PTQ reward of each fp32 agent next to the QAT reward (mean and std over the
    QAT agents, one per training seed), from the rows of one QAT and one PTQ variant.

    Matched on the precision (``int8``, ``fp16``, ``bf16``...), never on bit count: fp16, bf16 and int16 differ.
    An algo/env with several PTQ agents gets one row per agent (``ptq agent``).
    """
    if qat.empty:
        return pd.DataFrame()
    records = []
    quantized = qat[qat["precision"] != "fp32"]
    for (algo, env_id, precision), group in quantized.groupby(["algo", "env_id", "precision"]):
        baseline = ptq[(ptq["algo"] == algo) & (ptq["env_id"] == env_id)] if len(ptq) else ptq
        cells = [cell for _, cell in baseline.groupby("reference_key")] if len(baseline) else [None]
        for cell in cells:  # one row per PTQ agent, or one without PTQ numbers

            def reward(of: str, cell: pd.DataFrame | None = cell) -> float:
                if cell is None:
                    return float("nan")
                found = cell[cell["precision"] == of]["mean_reward"]
                return float(found.iloc[0]) if len(found) else float("nan")

            records.append(
                {
                    "algo": algo,
                    "env": env_id,
                    "precision": precision,
                    "bits": int(group["bits"].iloc[0]),
                    "ptq agent": cell["agent_hash"].iloc[0] if cell is not None else None,
                    "fp32 Rwd": reward("fp32"),
                    "PTQ Rwd": reward(precision),
                    "QAT Rwd": group["mean_reward"].mean(),
                    "QAT std over seeds": group["mean_reward"].std(ddof=0),
                    "QAT seeds": len(group),
                }
            )
    if not records:
        return pd.DataFrame()
    return pd.DataFrame.from_records(records).sort_values(["algo", "env", "bits"], ascending=[True, True, False])


PAPER_PRECISIONS = ("fp32", "fp16", "int8")


def paper_vs_measured(selected: pd.DataFrame, paper: pd.DataFrame, layers: str) -> pd.DataFrame:
    """Each published reward next to the measured one of the same algo, env and precision, with the measured 95%
    bootstrap CI and whether the paper's value lies inside it; E% side by side where the paper gives it.

    :param paper: columns ``algo, env`` and ``{fp32,fp16,int8}_reward`` (``e_{fp16,int8}_pct`` optional), env names
        as the paper writes them (mapped with ``zoo_configs/envs.yaml``, no env is imported).
    :param layers: the layer mode of ``selected`` (``paper`` or ``quarl-code``), written in every row.
    """
    from quarl_bench.config import alias_env_id

    if selected.empty or paper.empty:
        return pd.DataFrame()
    rows = []
    for _, published in paper.iterrows():
        algo, env_id = str(published["algo"]).lower(), alias_env_id(str(published["env"]))
        measured = selected[(selected["algo"] == algo) & (selected["env_id"] == env_id)]
        for _reference_key, cell in measured.groupby("reference_key") if len(measured) else []:
            by_precision = cell.set_index("precision")
            for precision in PAPER_PRECISIONS if layers == "paper" else PAPER_PRECISIONS[1:]:  # one fp32 row
                column = f"{precision}_reward"
                if column not in published or pd.isna(published[column]) or precision not in by_precision.index:
                    continue
                row = by_precision.loc[precision]
                low, high = bootstrap_ci(row["episode_rewards"])
                paper_error = published.get(f"e_{precision}_pct", float("nan"))
                rows.append(
                    {
                        "algo": algo,
                        "env": env_id,
                        "precision": precision,
                        "layers": layers,
                        "paper reward": float(published[column]),
                        "measured reward": row["mean_reward"],
                        "CI low": low,
                        "CI high": high,
                        "paper inside CI": bool(low <= published[column] <= high),
                        "paper E %": paper_error,
                        "measured E %": row["error_pct"],
                        "episodes": int(row["episodes"]),
                        "agent": row["agent_hash"],
                        "row key": row["key"],
                    }
                )
    return pd.DataFrame(rows)


def paper_reference(paper_dir: Path) -> pd.DataFrame:
    """QuaRL Table 2 and the ActorQ appendix Table 4 rows (rewards only), as one frame."""
    frames = [
        pd.read_csv(paper_dir / name)
        for name in ("quarl_table2.csv", "actorq_appendix_table4.csv")
        if (paper_dir / name).is_file()
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


PAPER_POLICIES = {"small": "Policy A", "medium": "Policy B", "large": "Policy C"}  # QuaRL Table 5's sizes, in order


def amp_table(results: pd.DataFrame, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mixed-precision runs: ms per gradient update, speed-up over the fp32 run it was trained beside (the row whose
    agent its training record names; for records without that name, the one fp32 row of the same policy size, seed,
    steps and device, and no speed-up when there are several), reward; with QuaRL Table 5's runtimes and speed-up
    for the policy of the same rank (A/B/C: small, medium, large; the paper's were DQN Pong CNNs on a GPU, ours
    are MLPs)."""
    runs = results[results["method"] == "amp"]
    records = [
        {"device": "cpu"}
        | row["provenance"]["training"]
        | {"reward": row["mean_reward"], "row": row["key"], "agent": row["agent_hash"]}
        for _, row in runs.iterrows()
    ]
    if not records:
        return pd.DataFrame()
    frame = pd.DataFrame.from_records(records)
    records_of = frame.get("device_record", pd.Series([None] * len(frame)))
    frame["device"] = [  # rows of two GPUs are two devices, as two CPU kinds are
        f"cuda: {record.get('gpu')}" if isinstance(record, dict) and record.get("device") == "cuda" else device
        for device, record in zip(frame["device"], records_of, strict=True)
    ]
    keys = ["algo", "env_id", "arch", "n_timesteps", "seed", "device"]
    fp32 = frame[frame["dtype"] == "fp32"]
    baselines = [fp32_baseline(row, fp32, keys) for _, row in frame.iterrows()]
    frame["fp32 row"] = [b["row"] if b is not None else None for b in baselines]
    frame["speed-up"] = [
        b["ms_per_update"] / row["ms_per_update"] if b is not None else float("nan")
        for b, (_, row) in zip(baselines, frame.iterrows(), strict=True)
    ]
    frame["load"] = [
        load_text(load if isinstance(load, dict) else None) or "not recorded"
        for load in frame.get("load", [None] * len(frame))
    ]
    frame["bf16/fp16 units"] = [
        device_units(record)
        if isinstance(record, dict)  # a GPU run names its GPU and tensor cores, not this CPU's features
        else (" ".join(flags) or "none")
        if isinstance(flags, list)
        else "not recorded"
        for record, flags in zip(
            frame.get("device_record", [None] * len(frame)),
            frame.get("half_features", [None] * len(frame)),
            strict=True,
        )
    ]
    frame = frame[
        [*keys, "dtype", "ms_per_update", "updates", "speed-up", "reward", "load", "bf16/fp16 units", "row", "fp32 row"]
    ].sort_values(keys + ["dtype"])
    if paper is not None and not paper.empty:
        published = paper.set_index("policy")
        policy = frame["arch"].map(PAPER_POLICIES)
        frame["paper policy"] = policy
        frame["paper fp32 min"] = policy.map(published["fp32_runtime_min"])
        frame["paper mixed min"] = policy.map(published["mixed_precision_runtime_min"])
        frame["paper speed-up"] = policy.map(published["speedup"])
    return frame


AMP_SPREAD = "mean within fp32 seeds' mean ± std (descriptive, not a verdict)"


def amp_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per policy size and dtype of :func:`amp_table`'s runs, over seeds: mean ms per update, mean speed-up, the
    final reward's mean and std over seeds, and whether the mixed-precision mean lies within the fp32 seeds'
    spread (mean ± std): a description of the seeds, not a verdict (the column says so; ``certify`` decides)."""
    records = []
    for arch, group in runs.groupby("arch", sort=False) if len(runs) else []:
        fp32 = group.loc[group["dtype"] == "fp32", "reward"]
        for dtype, rows in group.groupby("dtype", sort=False):
            mean = float(rows["reward"].mean())
            within = "-" if dtype == "fp32" else ("yes" if abs(mean - fp32.mean()) <= fp32.std(ddof=0) else "no")
            records.append(
                {
                    "arch": arch,
                    "dtype": dtype,
                    "seeds": len(rows),
                    "ms_per_update": float(rows["ms_per_update"].mean()),
                    "speed-up": float(rows["speed-up"].mean()),
                    "reward": mean,
                    "reward std": float(rows["reward"].std(ddof=0)),
                    AMP_SPREAD: within,
                }
            )
    return pd.DataFrame.from_records(records)


def fp32_baseline(row: pd.Series, fp32: pd.DataFrame, keys: list[str]) -> pd.Series | None:
    """The fp32 record ``row`` is compared with: itself for fp32, else the one its record names, else the only
    fp32 record of the same configuration; None when that is ambiguous or missing."""
    if row["dtype"] == "fp32":
        return row
    named = row.get("fp32_agent_hash")
    if isinstance(named, str):  # rows of that one agent share its training record
        match = fp32[fp32["agent"] == named]
        return match.iloc[0] if len(match) else None
    match = fp32[(fp32[keys] == row[keys]).all(axis=1)]
    return match.iloc[0] if len(match) == 1 else None


def amp_report(results: pd.DataFrame, paper_dir: Path | None = None) -> list[Table]:
    """``amp_timing``, next to QuaRL Table 5 when ``paper_dir`` has it."""
    paper_file = paper_dir / "quarl_table5_mixed_precision.csv" if paper_dir is not None else None
    paper = pd.read_csv(paper_file) if paper_file is not None and paper_file.is_file() else None
    table = amp_table(results, paper)
    return [Table("amp_timing", "Mixed-precision training", table)] if len(table) else []
