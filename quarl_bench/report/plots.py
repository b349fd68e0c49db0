"""Sweet-spot curves (QuaRL Figure 7): reward vs bits per algo/env, with fp32 as the reference line and the narrowest
width safe by the report's one rule (:func:`~quarl_bench.report.safe_bits.safe_rule`, ``--tolerance`` in it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from quarl_bench.precision import is_int
from quarl_bench.report.estimators import minimum_safe_bits
from quarl_bench.report.objects import Figure, keys_in, panel_margins, plain_log_axis
from quarl_bench.statistics.wording import safe_width_text
from quarl_bench.store.agent_names import name_of

CURVE_COLUMNS = ["bits", "mean_reward", "std_reward"]


@dataclass(frozen=True)
class Curve:
    """One cell's integer widths (rows of one variant, by bits), its fp32 reward, and per width the report's one rule
    read on the seeded statistics (:func:`~quarl_bench.report.safe_bits.safe_rule`): the sequence's lower bound on
    the mean difference and the δ it is held against (NaN where the statistics have no paired row)."""

    points: pd.DataFrame
    fp32_reward: float
    lower: dict[int, float]
    delta: float
    rule: str

    def lowest_safe(self) -> int | None:
        """The narrowest width safe with every wider one safe too (None: even the widest misses, or no evidence)."""
        return minimum_safe_bits(self.lower, self.delta) if self.lower and self.delta == self.delta else None


def sweet_spot(curve: Curve) -> tuple[int, int | None]:
    """(bits with the best reward, the narrowest safe bits by the report's one rule, or None)."""
    best = int(curve.points.loc[curve.points["mean_reward"].idxmax(), "bits"])
    return best, curve.lowest_safe()


def _evidence(statistics: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """A quantized row's key -> (its statistics row's sequence lower bound, δ)."""
    from quarl_bench.report.methods import quantized_keys
    from quarl_bench.report.safe_bits import sequence_lower

    evidence: dict[str, tuple[float, float]] = {}
    if statistics.empty or "sequence low" not in statistics.columns:
        return evidence
    for rows, low, delta in zip(statistics["rows"], statistics["sequence low"], statistics["delta"], strict=True):
        for key in quantized_keys(pd.Series([rows])):
            evidence[key] = (sequence_lower(float(low)), float(delta))
    return evidence


def integer_curves(
    selected: pd.DataFrame, statistics: pd.DataFrame, tolerance_pct: float
) -> dict[tuple[str, str], Curve]:
    """Per cell of one variant (``ResultStore.select``): the int-precision rows sorted by bits, the reward of their
    own fp32 reference row, and each width's evidence by the report's one rule from ``statistics`` (the seeded
    statistics, ``--tolerance`` in their δ); cells with < 2 points skipped. Keys are (algo, cell label)."""
    from quarl_bench.report.safe_bits import safe_rule
    from quarl_bench.report.tables import cell_labels

    if selected.empty:
        return {}
    labels, evidence = cell_labels(selected), _evidence(statistics)
    curves = {}
    for reference_key, group in selected.groupby("reference_key"):
        fp32 = group[group["precision"] == "fp32"]
        ints = group[group["precision"].map(is_int)].sort_values("bits")
        if len(fp32) and len(ints) >= 2:
            found = {
                int(bits): evidence[key] for bits, key in zip(ints["bits"], ints["key"], strict=True) if key in evidence
            }
            deltas = {delta for _, delta in found.values()}
            curves[(fp32["algo"].iloc[0], labels[reference_key])] = Curve(
                ints,
                float(fp32["mean_reward"].iloc[0]),
                {bits: low for bits, (low, _) in found.items()},
                deltas.pop() if len(deltas) == 1 else float("nan"),
                safe_rule(tolerance_pct),
            )
    return curves


def draw_curve(ax: plt.Axes, algo: str, env_id: str, curve: Curve) -> None:
    points = curve.points
    bits, mean, std = points["bits"], points["mean_reward"], points["std_reward"]
    ax.plot(bits, mean, marker="o", label="PTQ (uniform affine)")
    ax.fill_between(bits, mean - std, mean + std, alpha=0.2, label="± 1 std over episodes")
    ax.axhline(curve.fp32_reward, color="black", linestyle="--", linewidth=1, label="fp32")
    lowest = curve.lowest_safe()
    if lowest is not None:
        ax.axvline(lowest, color="green", linestyle=":", label=f"narrowest safe (δ = {curve.delta:.3g}): {lowest} bits")
    if not curve.lower:
        within = "safety not measured (no paired rows)"
    else:
        within = f"{safe_width_text(lowest, curve.lower)} bits safe" if lowest is not None else "no width safe"
    ax.set_title(f"{algo.upper()} {env_id}: {within}", wrap=True)
    ax.set_xlabel("weight bits")
    ax.set_ylabel("mean episode reward")
    ax.legend(fontsize="small")


def sweet_spot_figures(selected: pd.DataFrame, statistics: pd.DataFrame, tolerance_pct: float) -> list[Figure]:
    """One figure per cell of one variant, and a grid of all of them (not on the page: it repeats them); each says
    which rule marks a width safe (the report's one rule, ``tolerance_pct`` in its δ)."""
    curves = integer_curves(selected, statistics, tolerance_pct)
    keys = {cell: tuple(curve.points["key"]) for cell, curve in curves.items()}
    data = {cell: replace(curve, points=curve.points[CURVE_COLUMNS]) for cell, curve in curves.items()}
    figures = [
        Figure(
            f"sweetspot_{algo}_{file_label(env_id)}",
            SECTION,
            draw_sweet_spot,
            (algo, env_id, curve),
            120,
            keys[(algo, env_id)],
        )
        for (algo, env_id), curve in data.items()
    ]
    if data:
        every = tuple(key for cell in keys for key in keys[cell])
        figures.append(Figure("sweetspot_grid", SECTION, draw_sweet_spot_grid, (data,), 100, every, on_page=False))
    return figures


SECTION = "Sweet spot: reward against bits"


def draw_sweet_spot(algo: str, env_id: str, curve: Curve) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 4.4))
    draw_curve(ax, algo, env_id, curve)
    fig.text(0.5, 0.01, _wrapped(curve.rule), ha="center", va="bottom", fontsize="x-small")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def _wrapped(text: str, width: int = 100) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def draw_sweet_spot_grid(curves: dict[tuple[str, str], Curve]) -> plt.Figure:
    cols = min(3, len(curves))
    rows = math.ceil(len(curves) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax, ((algo, env_id), curve) in zip(axes.flat, curves.items(), strict=False):
        draw_curve(ax, algo, env_id, curve)
    for ax in list(axes.flat)[len(curves) :]:
        ax.set_visible(False)
    rule = next(iter(curves.values())).rule
    fig.suptitle(f"Reward vs weight bits (post-training quantization)\n{_wrapped(rule, 140)}")
    panel_margins(fig, left=0.9, top=1.4, wspace=1.0, hspace=1.0)
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
