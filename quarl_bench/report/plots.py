"""Sweet-spot curves (QuaRL Figure 7): reward vs bits per algo/env, with fp32 as the reference line."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from quarl_bench.precision import is_int
from quarl_bench.report.objects import Figure, keys_in, panel_margins, plain_log_axis
from quarl_bench.statistics.wording import safe_width_text
from quarl_bench.store.agent_names import name_of

WITHIN_FP32 = 0.05  # "lowest bit width within 5% of fp32"
CURVE_COLUMNS = ["bits", "mean_reward", "std_reward"]


def sweet_spot(curve: pd.DataFrame, fp32_reward: float) -> tuple[int, int | None]:
    """(bits with the best reward, lowest bits whose reward is within 5% of fp32 or None)."""
    best = int(curve.loc[curve["mean_reward"].idxmax(), "bits"])
    ok = curve[curve["mean_reward"] >= fp32_reward - WITHIN_FP32 * abs(fp32_reward)]
    return best, (int(ok["bits"].min()) if len(ok) else None)


def integer_curves(selected: pd.DataFrame) -> dict[tuple[str, str], tuple[pd.DataFrame, float]]:
    """Per cell of one variant (``ResultStore.select``): the int-precision rows sorted by bits and the reward of
    their own fp32 reference row; cells with < 2 points skipped. Keys are (algo, cell label)."""
    from quarl_bench.report.tables import cell_labels

    if selected.empty:
        return {}
    labels = cell_labels(selected)
    curves = {}
    for reference_key, group in selected.groupby("reference_key"):
        fp32 = group[group["precision"] == "fp32"]
        ints = group[group["precision"].map(is_int)].sort_values("bits")
        if len(fp32) and len(ints) >= 2:
            curves[(fp32["algo"].iloc[0], labels[reference_key])] = (ints, float(fp32["mean_reward"].iloc[0]))
    return curves


def draw_curve(ax: plt.Axes, algo: str, env_id: str, curve: pd.DataFrame, fp32_reward: float) -> None:
    bits, mean, std = curve["bits"], curve["mean_reward"], curve["std_reward"]
    ax.plot(bits, mean, marker="o", label="PTQ (uniform affine)")
    ax.fill_between(bits, mean - std, mean + std, alpha=0.2, label="± 1 std over episodes")
    ax.axhline(fp32_reward, color="black", linestyle="--", linewidth=1, label="fp32")
    _, lowest = sweet_spot(curve, fp32_reward)
    if lowest is not None:
        ax.axvline(lowest, color="green", linestyle=":", label=f"lowest within 5% of fp32: {lowest} bits")
    within = f"{safe_width_text(lowest, curve['bits'])} bits within 5%" if lowest is not None else "no width within 5%"
    ax.set_title(f"{algo.upper()} {env_id}: {within}", wrap=True)
    ax.set_xlabel("weight bits")
    ax.set_ylabel("mean episode reward")
    ax.legend(fontsize="small")


def sweet_spot_figures(selected: pd.DataFrame) -> list[Figure]:
    """One figure per cell of one variant, and a grid of all of them (not on the page: it repeats them)."""
    curves = integer_curves(selected)
    keys = {cell: tuple(curve["key"]) for cell, (curve, _) in curves.items()}
    data = {cell: (curve[CURVE_COLUMNS], fp32) for cell, (curve, fp32) in curves.items()}
    figures = [
        Figure(
            f"sweetspot_{algo}_{file_label(env_id)}",
            SECTION,
            draw_sweet_spot,
            (algo, env_id, curve, fp32),
            120,
            keys[(algo, env_id)],
        )
        for (algo, env_id), (curve, fp32) in data.items()
    ]
    if data:
        every = tuple(key for cell in keys for key in keys[cell])
        figures.append(Figure("sweetspot_grid", SECTION, draw_sweet_spot_grid, (data,), 100, every, on_page=False))
    return figures


SECTION = "Sweet spot: reward against bits"


def draw_sweet_spot(algo: str, env_id: str, curve: pd.DataFrame, fp32: float) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 4))
    draw_curve(ax, algo, env_id, curve, fp32)
    fig.tight_layout()
    return fig


def draw_sweet_spot_grid(curves: dict[tuple[str, str], tuple[pd.DataFrame, float]]) -> plt.Figure:
    cols = min(3, len(curves))
    rows = math.ceil(len(curves) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax, ((algo, env_id), (curve, fp32)) in zip(axes.flat, curves.items(), strict=False):
        draw_curve(ax, algo, env_id, curve, fp32)
    for ax in list(axes.flat)[len(curves) :]:
        ax.set_visible(False)
    fig.suptitle("Reward vs weight bits (post-training quantization)")
    panel_margins(fig, left=0.9, top=1.1, wspace=1.0, hspace=1.0)
    return fig


def weight_figures(selected: pd.DataFrame) -> list[Figure]:
    """QuaRL Figure 2/3: per env, the fp32 acting-weight histogram of each agent (each fp32 row of one variant)
    with the int8 grid marked."""
    if selected.empty:
        return []
    fp32 = selected[(selected["precision"] == "fp32") & selected["weights"].map(bool)]
    figures = []
    for env_id, group in fp32.groupby("env_id"):
        group = group.sort_values("algo")
        panels = [(name_of(row), row["weights"]) for _, row in group.iterrows()]  # the name holds the algo
        figures.append(
            Figure(
                f"weights_{file_label(env_id)}",
                "Weight distributions",
                draw_weight_figure,
                (env_id, panels),
                110,
                tuple(group["key"]),
            )
        )
    return figures


def draw_weight_figure(env_id: str, panels: list[tuple[str, dict]]) -> plt.Figure:
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for ax, (title, profile) in zip(axes.flat, panels, strict=True):
        draw_weight_histogram(ax, title, profile)
    fig.suptitle(f"{env_id}: fp32 weights, int8 step = range / 256", wrap=True)
    panel_margins(fig, top=1.0, bottom=0.65, wspace=1.0)
    return fig


def file_label(label: str) -> str:
    """A cell label as part of a file name."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label).strip("_")


def draw_weight_histogram(ax: plt.Axes, title: str, profile: dict) -> None:
    counts = profile["histogram"]
    lo, hi = profile["min"], profile["max"]
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, len(counts) + 1)
    # one filled path, not a rectangle per bin: the same picture at a fraction of the drawing time
    ax.stairs(counts, edges, fill=True, color="tab:blue")
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    for edge in (lo, hi):
        ax.axvline(edge, color="tab:red", linestyle="--", linewidth=1)
    step = profile["range"] / 256
    ax.set_title(f"{title}\nstd {profile['std']:.3f}, kurtosis {profile['kurtosis']:.1f}", fontsize="medium")
    ax.set_xlabel(f"weight value (int8 range [{lo:.2f}, {hi:.2f}], step {step:.4f})", fontsize="small")
    ax.set_ylabel("count (log)")


def qat_figures(table: pd.DataFrame) -> list[Figure]:
    """QuaRL Figure 1/5: reward vs bits for fp32, PTQ and QAT on the same axes, one figure per algo/env."""
    figures = []
    for (algo, env_id), group in table.groupby(["algo", "env"]) if len(table) else []:
        keys = keys_in(value for column in group.columns for value in group[column])
        figures.append(
            Figure(
                f"qat_vs_ptq_{algo}_{file_label(env_id)}",
                "QAT against PTQ",
                draw_qat_figure,
                (algo, env_id, group.sort_values("bits")),
                120,
                keys,
            )
        )
    return figures


def draw_qat_figure(algo: str, env_id: str, group: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.axhline(group["fp32 Rwd"].iloc[0], color="black", linestyle="--", linewidth=1, label="fp32")
    ax.plot(group["bits"], group["PTQ Rwd"], marker="o", label="PTQ")
    ax.errorbar(
        group["bits"],
        group["QAT Rwd"],
        yerr=group["QAT std over seeds"],
        marker="s",
        capsize=3,
        label=f"QAT (mean ± std over {int(group['QAT seeds'].max())} seeds)",
    )
    ax.set_title(f"{algo.upper()} {env_id}: QAT vs PTQ")
    ax.set_xlabel("weight bits")
    ax.set_ylabel("mean episode reward")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
