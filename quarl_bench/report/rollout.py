"""Quantized-rollout outputs: final reward per rollout precision and correction against fp32 rollouts (paired by
training seed), time to threshold, mismatch and entropy; learning and mismatch curves with seed CIs per study."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from quarl_bench.report.estimators import bootstrap_ci, iqm, stratified_bootstrap_ci
from quarl_bench.report.objects import Figure, Table
from quarl_bench.report.plots import file_label
from quarl_bench.types import ROLLOUT_REFERENCE

# per-update diagnostics (training/mismatch.py) -> the table's column: their mean over all updates of all seeds
MISMATCH = {
    "kl": "KL(π_q‖π)",
    "kl_k3": "KL k3",
    "ratio_max": "max π/π_q",
    "share_capped": "share > C",
    "share_masked": "share outside [1/C, C]",
    "agreement": "greedy agreement",
    "entropy_fp32": "entropy π",
    "entropy_gap": "entropy π_q - π",
}


def rollout_runs(results: pd.DataFrame) -> pd.DataFrame:
    """One record per ``rollout`` row: its study, precision, correction label, seed, final reward and curve."""
    if results.empty or "method" not in results:
        return pd.DataFrame()
    rows = results[results["method"] == "rollout"]
    records = []
    for _, row in rows.iterrows():
        training = row["provenance"].get("training") or {}
        study, label = row["setting"].split("/", 1)
        records.append(
            {
                "study": study,
                "env": row["env_id"],
                "algo": row["algo"],
                "precision": row["precision"],
                "correction": label,
                "seed": int(row["seed"]),
                "final_reward": float(row["mean_reward"]),
                "curve": training.get("curve", []),
                "threshold": training.get("threshold"),
                "training_steps": training.get("training_steps"),
                "seconds": training.get("seconds", {}),
                "row": row["key"],
            }
        )
    return pd.DataFrame.from_records(records)


def steps_to_threshold(curve: list[dict[str, Any]], threshold: float | None) -> float | None:
    """Env steps until the training reward (mean of the last 100 episodes) first reaches ``threshold``; None if
    never (or no threshold)."""
    if threshold is None:
        return None
    for point in curve:
        if point.get("reward") is not None and point["reward"] >= threshold:
            return float(point["timesteps"])
    return None


def _mean_over_updates(curves: pd.Series, name: str) -> float:
    if name == "entropy_gap":
        return _mean_over_updates(curves, "entropy_behaviour") - _mean_over_updates(curves, "entropy_fp32")
    values = [point[name] for curve in curves for point in curve if point.get(name) is not None]
    return float(np.mean(values)) if values else float("nan")


def rollout_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per study, rollout precision and correction, over training seeds: IQM of the final fp32-policy reward with its
    bootstrap CI; the mean paired difference with fp32 rollouts of the same seed and its CI (``CI excludes 0``: the
    seeds support an effect); steps to the reward threshold; mismatch and entropies averaged over all updates."""
    records = []
    for (study, env, algo), group in runs.groupby(["study", "env", "algo"], sort=False) if len(runs) else []:
        reference = group[(group["precision"] == "fp32") & (group["correction"] == ROLLOUT_REFERENCE)]
        base = dict(zip(reference["seed"], reference["final_reward"], strict=True))
        for (precision, correction), runs_at in group.groupby(["precision", "correction"], sort=False):
            finals = runs_at["final_reward"].to_numpy()
            point, low, high = stratified_bootstrap_ci([finals], iqm)
            paired = [r - base[s] for s, r in zip(runs_at["seed"], finals, strict=True) if s in base]
            difference = float(np.mean(paired)) if paired else float("nan")
            diff_low, diff_high = bootstrap_ci(paired) if len(paired) > 1 else (float("nan"), float("nan"))
            is_reference = precision == "fp32" and correction == ROLLOUT_REFERENCE
            steps = [steps_to_threshold(c, t) for c, t in zip(runs_at["curve"], runs_at["threshold"], strict=True)]
            reached = [s for s in steps if s is not None]
            records.append(
                {
                    "env": env,
                    "algo": algo,
                    "rollout precision": precision,
                    "evaluated policy": "fp32 learner",  # rollouts were played at the precision; episodes by fp32
                    "correction": correction,
                    "seeds": len(runs_at),
                    "final reward IQM": point,
                    "IQM CI": f"[{low:.1f}, {high:.1f}]",
                    "vs fp32 rollouts": None if is_reference else difference,
                    "paired CI": None if is_reference or np.isnan(diff_low) else f"[{diff_low:.1f}, {diff_high:.1f}]",
                    "CI excludes 0": None
                    if is_reference or np.isnan(diff_low)
                    else bool(diff_low > 0 or diff_high < 0),
                    "threshold": runs_at["threshold"].iloc[0],
                    "steps to threshold (median)": int(np.median(reached)) if reached else None,
                    "seeds reaching": f"{len(reached)}/{len(steps)}",
                    **{column: _mean_over_updates(runs_at["curve"], name) for name, column in MISMATCH.items()},
                    "study": study,
                    "rows": ", ".join(runs_at["row"]),
                }
            )
    return pd.DataFrame(records)


CURVE_BINS = 40  # a study's updates averaged into this many bins of env steps: hundreds of updates are unreadable


def curve_frame(runs: pd.DataFrame, name: str) -> pd.DataFrame:
    """``name`` per update, one column per seed, averaged into :data:`CURVE_BINS` bins of env steps (indexed by
    each bin's last step; the runs of a study update at the same steps)."""
    columns = {}
    for _, run in runs.iterrows():
        points = [(p["timesteps"], p.get(name)) for p in run["curve"]]
        columns[run["seed"]] = pd.Series(
            [np.nan if v is None else v for _, v in points], index=[t for t, _ in points], dtype=float
        )
    frame = pd.DataFrame(columns).sort_index()
    bins = np.arange(len(frame)) * CURVE_BINS // max(len(frame), 1)
    binned = frame.groupby(bins).mean()
    binned.index = frame.index.to_series().groupby(bins).max().to_numpy()
    return binned


def _band(ax: plt.Axes, frame: pd.DataFrame, label: str, style: dict[str, Any], log: bool = False) -> None:
    """Mean over seeds with a normal-approximation 95% CI band (none for one seed; on a log axis the mean only)."""
    mean = frame.mean(axis=1)
    ax.plot(frame.index, mean, label=label, **style)
    if frame.shape[1] > 1 and not log:
        half = 1.96 * frame.std(axis=1) / np.sqrt(frame.count(axis=1))
        ax.fill_between(frame.index, mean - half, mean + half, color=style["color"], alpha=0.12)


PANELS = (
    ("reward", "training reward (last 100 episodes)", False),
    ("kl", "KL(π_q ‖ π) per state", True),
    ("share_masked", "share of ratios π/π_q outside [1/C, C]", False),
    ("entropy_behaviour", "entropy of the behaviour policy", False),
)
LINESTYLES = {"none": "-", "tis": "--", "mis": ":"}


def rollout_figures(runs: pd.DataFrame) -> list[Figure]:
    """One figure per study (:func:`draw_rollout`)."""
    return [
        Figure(
            f"rollout_{file_label(env)}_{study}", SECTION, draw_rollout, (algo, env, group), 110, tuple(group["row"])
        )
        for (study, env, algo), group in runs.groupby(["study", "env", "algo"], sort=False)
    ]


SECTION = "Quantized rollouts"


def draw_rollout(algo: str, env: str, group: pd.DataFrame) -> plt.Figure:
    """The panels of :data:`PANELS` against env steps; colour: rollout precision, line style: correction (solid
    none, dashed tis, dotted mis)."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 4.2))
    colours = {p: f"C{i}" for i, p in enumerate(dict.fromkeys(group["precision"]))}
    for (precision, correction), runs_at in group.groupby(["precision", "correction"], sort=False):
        style = {"color": colours[precision], "linestyle": LINESTYLES[correction.split("-")[0]]}
        label = f"{precision} {correction} ({len(runs_at)} seeds)"
        for ax, (name, _, log) in zip(axes, PANELS, strict=True):
            if name == "kl" and precision == "fp32":
                continue  # zero up to rounding: nothing to draw on a log axis
            _band(ax, curve_frame(runs_at, name), label, style, log)
    for ax, (_, title, log) in zip(axes, PANELS, strict=True):
        ax.set_xlabel("env steps")
        ax.set_title(title, fontsize="medium")
        if log:
            ax.set_yscale("log")
    threshold = group["threshold"].iloc[0]
    if threshold is not None:
        axes[0].axhline(threshold, color="grey", linestyle=":", label=f"threshold {threshold:g}")
    axes[0].legend(fontsize="x-small", ncol=2)
    fig.suptitle(f"{algo} {env}: quantized rollouts (mean over seeds in {CURVE_BINS} bins, 95% CI)")
    fig.tight_layout()
    return fig


def rollout_report(results: pd.DataFrame) -> list[Table | Figure]:
    """``rollout_final`` and one curve figure per study; nothing when the store has no rollout rows."""
    runs = rollout_runs(results)
    if runs.empty:
        return []
    table = Table("rollout_final", SECTION, rollout_table(runs), decimals=None)  # KL spans 1e-8 to 1: .4g
    return [table, *rollout_figures(runs)]
