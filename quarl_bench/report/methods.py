"""Quantization methods side by side, from the seeded statistics (``statistics.seeded_statistics``):

- ``methods_safe_width``: per agent, the minimum safe weight width of each method (RTN on QuaRL's grid, per channel,
  per group, GPTQ, learned rounding, the MX ladder, fp8 and NVFP4), by the report's one rule (``--tolerance``);
- ``wa_heatmap``: E% over weight x activation widths, and observation-only widths, per agent;
- ``compression_frontier``: acting-network bytes against reward (IQM, 95% CI) for every method and pruning level,
  with each agent's Pareto front.

Every cell names the rows it came from (the statistics' ``rows`` keys).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from quarl_bench.precision import precision_bits
from quarl_bench.report.estimators import minimum_safe_bits
from quarl_bench.report.objects import Figure, Table, keys_in, panel_margins, plain_log_axis
from quarl_bench.report.safe_bits import safe_rule, sequence_lower
from quarl_bench.report.statistics import ACROSS_SPECS
from quarl_bench.report.verdicts import condition_of, outcome_of
from quarl_bench.statistics.wording import safe_width_text
from quarl_bench.store.agent_names import name_of
from quarl_bench.store.question import with_verdict_questions
from quarl_bench.store.spec_kinds import method_of, spec_of, weight_method

AGENT = ["algo", "env", "agent"]
# a panel of the heatmap or the frontier: one question with the spec summed over (store/question.py)
PANEL = "question"
# a certified line's question and certification settings
SETTINGS = ("outcome", "condition", "tolerance", "confidence", "seed base", "δ")


def _acting_rows(statistics: pd.DataFrame) -> pd.DataFrame:
    rows = statistics[statistics["precision"] != "fp32"].copy() if len(statistics) else statistics
    if rows.empty:
        return rows
    rows["method"] = rows["weight method"]
    return rows


def _verdict_methods(verdicts: pd.DataFrame) -> list[str | None]:
    """Each verdict's weight method, from its stored spec's fields, with the method that played it where that is
    not PTQ (``RTN (replayed)``): two methods' verdicts never share a column or a minimum."""
    labels: list[str | None] = []
    for fields in verdicts["spec_json"]:
        weights, played_by = weight_method(spec_of(fields)), method_of(fields)
        labels.append(weights if weights is None or played_by == "ptq" else f"{weights} ({played_by})")
    return labels


def certified_width_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per agent (and certification settings) and method: the certified minimum safe width from ``certify``'s
    stored verdicts (the narrowest width safe with every wider one certified safe too); ``> W`` when the widest
    certified width W is not safe; a one-width format shows its verdict. ``{method} rows``: the verdicts' batch rows.
    The one rule of the report: the same as ``certify`` prints."""
    from quarl_bench.statistics.certification import minimum_safe

    if verdicts.empty:
        return pd.DataFrame()
    frame = verdicts.copy()
    frame["method"] = _verdict_methods(frame)
    frame["weights"] = [weight_method(spec_of(fields)) for fields in frame["spec_json"]]
    frame = frame[frame["method"].notna()]
    frame["seed"] = [settings["seed"] for settings in frame["settings"]]
    frame["outcome"] = [outcome_of(settings) for settings in frame["settings"]]
    frame["condition"] = [condition_of(settings) for settings in frame["settings"]]
    records: dict[str, dict[str, Any]] = {}
    # a line per verdict question with the spec summed over (store/question.py), a column per method
    frame = with_verdict_questions(frame, across_specs=True)
    for (line, method), group in frame.groupby(["question", "method"], sort=False):
        first = group.iloc[0]
        group = group.assign(bits=[precision_bits(p) for p in group["precision"]]).sort_values("bits", ascending=False)
        record = records.setdefault(
            line,
            {
                "algo": first["algo"],
                "env": first["env_id"],
                "agent": name_of(first),
                "outcome": first["outcome"],
                "condition": first["condition"],
                "tolerance": first["tolerance"],
                "confidence": round(1 - float(first["alpha"]), 3),
                "seed base": first["seed"],
                "δ": round(float(first["delta"]), 3),
            },
        )
        if set(group["precision"]) == set(group["weights"]):  # a format certified at its one width
            record[method] = group["verdict"].iloc[0]
        else:
            safe = minimum_safe(list(zip(group["precision"], group["verdict"], strict=True)))
            safe_bits = precision_bits(safe) if safe is not None else None
            record[method] = safe_width_text(safe_bits, group["bits"])
        record[f"{method} rows"] = " ".join(key for keys in group["rows"] for key in keys)
    return pd.DataFrame.from_records(list(records.values()))


def safe_width_table(statistics: pd.DataFrame, tolerance_pct: float) -> pd.DataFrame:
    """Per agent (rows) and method (columns): the minimum safe weight width by the report's one rule
    (:func:`~quarl_bench.report.safe_bits.safe_rule`): the smallest width safe with every wider one safe too; ``> W``
    when even the widest measured width ``W`` misses. A format measured at one width only (fp8, NVFP4) shows ``ok`` or ``misses``.
    ``{method} rows``: the keys of the rows behind each cell."""
    rows = _acting_rows(statistics)
    if rows.empty:
        return pd.DataFrame()
    rows = rows[rows["method"].notna()]
    records: dict[str, dict[str, Any]] = {}
    # a line per question with the spec summed over (each method a column); a method's widths share its seeds
    for (line, method, _seeds), group in rows.groupby([ACROSS_SPECS, "method", "seed list"], sort=False):
        first = group.iloc[0]
        fp32_mean = float(first["fp32 mean"])
        lower = {int(b): sequence_lower(float(v)) for b, v in zip(group["bits"], group["sequence low"], strict=True)}
        safe = minimum_safe_bits(lower, float(first["delta"]))
        record = records.setdefault(
            f"{line} {_seeds}",
            {
                "algo": first["algo"],
                "env": first["env"],
                "agent": first["agent"],
                "condition": first[f"{ACROSS_SPECS} label"],
                "seed list": _seeds,
                "fp32": fp32_mean,
            },
        )
        if set(group["precision"]) == {method}:  # a format measured at its one width (fp8, NVFP4)
            record[method] = "ok" if safe is not None else "misses"
        else:
            record[method] = safe_width_text(safe, lower)
        record[f"{method} rows"] = " ".join(quantized_keys(group["rows"]))
    return pd.DataFrame.from_records(list(records.values()))


def quantized_keys(rows: pd.Series) -> list[str]:
    """The quantized rows' keys of statistics rows (their ``rows``: quantized keys, then the fp32 keys, per seed)."""
    keys = []
    for text in rows:
        parts = text.split()
        keys += parts[: len(parts) // 2]
    return keys


def width_number(value: Any) -> float:
    """A safe width as a number for medians: ``> W`` counts as W + 1 (the next width up, an optimistic bound), ``≤ W``
    as W (the narrowest width tried)."""
    if isinstance(value, str) and value.startswith(">"):
        return float(value[1:]) + 1
    if isinstance(value, str) and value.startswith("≤"):
        return float(value[1:])
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan  # not measured, or a one-width format's ok / misses


ONE_WIDTH_ANSWERS = ("ok", "misses", "safe", "unsafe", "undetermined")  # fixed-episode and certified answers


def method_medians(table: pd.DataFrame) -> pd.DataFrame:
    """Per method measured over a ladder of widths: agents measured and the median minimum safe width (``> W`` as
    W + 1); per single-width format: the agents where it holds."""
    named = ("algo", "env", "agent", "fp32", "condition", "seed list")
    methods = [c for c in table.columns if c not in named and not c.endswith(" rows")]
    records = []
    for method in methods:
        measured = [v for v in table[method] if not (isinstance(v, float) and math.isnan(v))]
        if measured and all(v in ONE_WIDTH_ANSWERS for v in measured):
            holds = sum(v in ("ok", "safe") for v in measured)
            records.append({"method": method, "agents": len(measured), "holds on": holds})
        else:
            values = [w for w in map(width_number, measured) if not math.isnan(w)]
            records.append(
                {
                    "method": method,
                    "agents": len(values),
                    "median safe width": np.median(values) if values else math.nan,
                }
            )
    frame = pd.DataFrame.from_records(records)
    if "median safe width" not in frame:  # single-width formats only (run --bits fp16): no ladder to take one from
        frame["median safe width"] = math.nan
    return frame.sort_values("median safe width", na_position="last")


def paired_gain(table: pd.DataFrame, calibrated: str, baseline: str = "RTN") -> dict[str, Any]:
    """Over agents measured with both: the median of (baseline width - calibrated width), and the medians."""
    if calibrated not in table or baseline not in table:
        return {}
    both = table[table[calibrated].notna() & table[baseline].notna()]
    if both.empty:
        return {}
    base = both[baseline].map(width_number)
    cal = both[calibrated].map(width_number)
    return {
        "method": calibrated,
        "agents": len(both),
        f"median {baseline}": float(np.median(base)),
        "median method": float(np.median(cal)),
        "median gain (bits)": float(np.median(base - cal)),
        "agents gaining >= 2 bits": int(((base - cal) >= 2).sum()),
        "agents losing": int(((base - cal) < 0).sum()),
    }


def heatmap_table(statistics: pd.DataFrame) -> pd.DataFrame:
    """Per agent, weight width x activation width (each acting layer's input, ``A``) or observation width
    (``obs``): E% of the mean reward (100 x (fp32 - mean) / |fp32|), from rows with nothing else changed."""
    if statistics.empty:
        return pd.DataFrame()
    records = []
    for _, row in statistics.iterrows():
        if not row["input"]:
            continue  # the reference, formats, other options (groups, rounding, pruning), or several inputs at once
        kind, width = row["input"].split()  # "A 32": weights only, the column of fp32 inputs
        fp32 = float(row["fp32 mean"])
        records.append(
            {
                "algo": row["algo"],
                "env": row["env"],
                "agent": row["agent"],
                PANEL: row[ACROSS_SPECS],
                "condition": row[f"{ACROSS_SPECS} label"],
                "W": precision_bits(row["precision"]),
                "input": kind,
                "bits": int(width),
                "E%": 100 * -float(row["mean - fp32"]) / abs(fp32) if fp32 else math.nan,
                "rows": row["rows"],
            }
        )
    return pd.DataFrame.from_records(records)


def frontier_table(statistics: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """Every weight-quantized or pruned row's acting bytes next to its IQM and CI; ``pareto``: no other point of the agent is
    at most as large and scores higher."""
    if statistics.empty:
        return pd.DataFrame()
    bytes_of = {key: w.get("acting_bytes") for key, w in zip(frame["key"], frame["weights"], strict=True)}
    nonzero_of = {key: w.get("nonzero_weights") for key, w in zip(frame["key"], frame["weights"], strict=True)}
    records = []
    for row in statistics.to_dict("records"):
        key = row["rows"].split()[0]
        if bytes_of.get(key) is None or row["inputs quantized"]:
            continue  # quantized inputs change no stored byte: the heatmap shows them
        records.append(
            {
                "algo": row["algo"],
                "env": row["env"],
                "agent": row["agent"],
                PANEL: row[ACROSS_SPECS],
                "condition": row[f"{ACROSS_SPECS} label"],
                "precision": row["precision"],
                "spec": row["spec"],
                "family": row["family"],
                "acting bytes": int(bytes_of[key]),
                "nonzero weights": nonzero_of.get(key),
                "IQM": row["IQM"],
                "IQM low": row["IQM low"],
                "IQM high": row["IQM high"],
                "row": key,
            }
        )
    table = pd.DataFrame.from_records(records)
    if table.empty:
        return table
    table["pareto"] = False
    for _, group in table.groupby(PANEL):
        for index, point in group.iterrows():
            beaten = group[(group["acting bytes"] <= point["acting bytes"]) & (group["IQM"] > point["IQM"])]
            table.loc[index, "pareto"] = beaten.empty
    return table.sort_values([*AGENT, "condition", "acting bytes"])


def certified_method_summary(verdicts: pd.DataFrame, certified: pd.DataFrame) -> pd.DataFrame:
    """Per method, over the certified agents: the median certified width ('> W' as W + 1), the share of its verdicts
    that ended undetermined, and the median paired episodes per decided verdict."""
    frame = verdicts.copy()
    frame["method"] = _verdict_methods(frame)
    medians = method_medians(certified.drop(columns=list(SETTINGS))).set_index("method")
    records = []
    for method, group in frame[frame["method"].notna()].groupby("method"):
        decided = group[group["verdict"] != "undetermined"]
        record = {"method": method, "verdicts": len(group)}
        if method in medians.index:
            record |= {k: v for k, v in medians.loc[method].items() if not pd.isna(v)}
        record["undetermined share"] = float((group["verdict"] == "undetermined").mean())
        record["median episodes per decision"] = float(decided["episodes"].median()) if len(decided) else math.nan
        records.append(record)
    return pd.DataFrame.from_records(records)


def methods_report(
    statistics: pd.DataFrame, frame: pd.DataFrame, tolerance_pct: float, verdicts: pd.DataFrame | None = None
) -> list[Table | Figure]:
    """The three tables and their figures; nothing for a store without such rows. The safe widths come from
    certified verdicts where the store has them (``methods_safe_width``); fixed-episode rows alone give the
    reward-CI evidence (``methods_safe_width_fixed``), labelled as such."""
    tables: list[Table] = []
    sections = []
    certified = certified_width_table(verdicts) if verdicts is not None else pd.DataFrame()
    if len(certified.columns) > len(AGENT) + len(SETTINGS):  # some method's column
        tables.append(Table("methods_safe_width", SECTION, certified))
        shown = certified[[c for c in certified.columns if not c.endswith(" rows")]]
        sections.append(
            "## Certified (`quarl-bench certify`)\n\nThe narrowest weight width certified safe with every wider width "
            "certified safe too ('> W': the widest certified width W is not safe; one-width formats: their verdict). "
            "Rows behind each cell: methods_safe_width.csv.\n\n"
            + shown.round(2).to_markdown(index=False)
            + "\n\nPer method over agents: median certified width ('> W' counted as W + 1), verdicts that ended "
            "undetermined, and paired episodes per decided verdict:\n\n"
            + certified_method_summary(verdicts, certified).round(2).to_markdown(index=False)
        )
    safe = safe_width_table(statistics, tolerance_pct)
    if not (safe.empty or len(safe.columns) <= 4):
        stem = "methods_safe_width_fixed" if sections else "methods_safe_width"
        tables.append(Table(stem, SECTION, safe, on_page=not sections))
        shown = safe[[c for c in safe.columns if not c.endswith(" rows")]]
        gains = [paired_gain(safe, m) for m in ("GPTQ", "learned rounding", "RTN per-channel", "RTN group 32")]
        summary = pd.DataFrame.from_records([g for g in gains if g])
        sections.append(
            f"## Evidence from fixed episodes (not certified)\n\nThe smallest weight width safe with every wider one "
            f"safe too, {safe_rule(tolerance_pct)} ('> W': even W misses; one-width formats: ok or misses). Rows "
            f"behind each cell: {stem}.csv.\n\n"
            + shown.round(2).to_markdown(index=False)
            + "\n\nMedians over agents ('> W' counted as W + 1):\n\n"
            + method_medians(safe).round(2).to_markdown(index=False)
            + (
                "\n\nAgainst RTN, paired by agent:\n\n" + summary.round(2).to_markdown(index=False)
                if len(summary)
                else ""
            )
        )
    if sections:
        tables[0].markdown = "# Minimum safe weight width per method\n\n" + "\n\n".join(sections) + "\n"
    items: list[Table | Figure] = list(tables)
    heat = heatmap_table(statistics)
    if not heat.empty and (heat["bits"] != 32).any():
        items.append(Table("wa_heatmap", SECTION, heat))
        items.append(Figure("wa_heatmap", SECTION, draw_heatmap, (heat,), 110, keys_in(heat["rows"])))
    frontier = frontier_table(statistics, frame)
    if not frontier.empty and frontier["spec"].nunique() > 1:
        items.append(Table("compression_frontier", SECTION, frontier))
        items.append(Figure("compression_frontier", SECTION, draw_frontier, (frontier,), 110, keys_in(frontier["row"])))
    return items


SECTION = "Quantization methods"


def _grid(count: int) -> tuple[int, int]:
    columns = min(4, count)
    return math.ceil(count / columns), columns


def panel_title(group: pd.DataFrame) -> str:
    """A panel's title: its agent's algo and env, and its question's condition where it is not the nominal one."""
    first = group.iloc[0]
    condition = first.get("condition", "nominal")
    return f"{first['algo']} {first['env']}" + ("" if condition == "nominal" else f"\n{condition}")


def draw_heatmap(heat: pd.DataFrame) -> Any:
    import matplotlib.pyplot as plt
    import seaborn as sns

    agents = list(heat.groupby(PANEL, sort=False))
    rows, columns = _grid(len(agents))
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.6 * rows), squeeze=False)
    for ax, (_panel, group) in zip(axes.flat, agents, strict=False):
        title = panel_title(group)  # before the filter below, which may leave no weights-only cell
        paired = set(group.loc[group["bits"] != 32, "W"]) | {32}  # weight widths measured with quantized inputs
        group = group[group["W"].isin(paired)]
        group = group.assign(
            column=[f"{k} {b}" if b != 32 else "fp32" for k, b in zip(group["input"], group["bits"], strict=True)]
        )
        order = sorted(
            set(group["column"]),
            key=lambda c: (c != "fp32", c.startswith("obs"), -int(c.split()[-1]) if c != "fp32" else 0),
        )
        pivot = group.pivot_table(index="W", columns="column", values="E%").reindex(columns=order)
        pivot = pivot.sort_index(ascending=False)
        pivot.index = ["fp32" if w == 32 else f"W{w}" for w in pivot.index]
        sns.heatmap(pivot, ax=ax, annot=True, fmt=".0f", cmap="RdYlGn_r", vmin=-10, vmax=100, cbar=False)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("input quantized")
        ax.set_ylabel("weights")
    for ax in list(axes.flat)[len(agents) :]:
        ax.axis("off")
    fig.suptitle("E% by weight width x activation width (A: every layer's input; obs: observations only)")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (2.6 * rows)))
    return fig


def draw_frontier(frontier: pd.DataFrame) -> Any:
    import matplotlib.pyplot as plt

    agents = list(frontier.groupby(PANEL, sort=False))
    rows, columns = _grid(len(agents))
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    for ax, (_panel, group) in zip(axes.flat, agents, strict=False):
        for family, points in group.groupby("family"):
            color = FAMILY_COLORS.get(family, "grey")
            ax.errorbar(
                points["acting bytes"],
                points["IQM"],
                yerr=[points["IQM"] - points["IQM low"], points["IQM high"] - points["IQM"]],
                fmt="o",
                markersize=3,
                color=color,
                label=family,
                alpha=0.8,
            )
        front = group[group["pareto"]].sort_values("acting bytes")
        ax.plot(front["acting bytes"], front["IQM"], color="black", linewidth=1)
        ax.set_xscale("log")
        plain_log_axis(ax.xaxis)
        ax.set_title(panel_title(group), fontsize=9)
        ax.set_xlabel("acting-network bytes")
        ax.set_ylabel("IQM reward")
    for ax in list(axes.flat)[len(agents) :]:
        ax.axis("off")
    legend: dict[str, Any] = {}  # a label's artist (its line or marker)
    for ax in axes.flat:
        legend |= dict(zip(*reversed(ax.get_legend_handles_labels()), strict=True))
    labels = sorted(legend, key=lambda f: list(FAMILY_COLORS).index(f) if f in FAMILY_COLORS else 99)
    handles = [legend[label] for label in labels]
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8)
    fig.suptitle("Compression frontier: bytes against reward (95% CI), black: Pareto front")
    panel_margins(fig, top=1.0, bottom=1.0 if rows == 1 else 1.1, wspace=0.8, hspace=0.9)
    return fig


FAMILY_COLORS = {
    "RTN / formats": "tab:orange",
    "RTN per-channel": "tab:green",
    "group-wise": "tab:red",
    "GPTQ": "tab:blue",
    "learned rounding": "tab:purple",
    "pruned": "tab:brown",
}
