"""Hardened agents (``quarl-bench harden``): each one next to its parent, from stored rows only.

A line is one ``hardened`` row, linked to its parent by name and hash (on the page, the parent's cell names the
parent's stored verdicts and batches; ``parent rows`` in the files): the recipe, its budget and cost, the certified minimum safe width of the parent
(against its own fp32) and of the hardened agent (against the **parent's** fp32, on the same paired episodes and δ),
the target spec's verdict before and after, the hardened fp32's verdict against the parent's fp32, and the decision
margins and weight spread before and after. The minimums are :func:`~quarl_bench.report.verdicts.verdict_grid`'s,
the rule ``certify`` applies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from quarl_bench.report.objects import Figure, Table
from quarl_bench.report.verdicts import is_equivalence, verdict_grid
from quarl_bench.statistics.certification import family
from quarl_bench.store.spec_kinds import method_of, spec_of

SECTION = "Hardened agents"


def _where(frame: pd.DataFrame, mask: list[bool]) -> pd.DataFrame:
    """The lines of ``frame`` where ``mask`` holds (an empty mask selects no line, not no column)."""
    return frame.loc[np.asarray(mask, dtype=bool)]


def _certification(settings: dict) -> dict:
    """A verdict's certification settings without the baseline it was compared with."""
    return {k: v for k, v in settings.items() if k != "baseline"}


def _minimum(grid: pd.DataFrame, label: str) -> str:
    line = grid[grid["family"] == label] if len(grid) else grid
    return str(line.iloc[-1]["certified minimum"]) if len(line) else "-"


def _cell(verdicts: pd.DataFrame, label: str) -> tuple[str, tuple[str, ...]]:
    if verdicts.empty:
        return "-", ()
    chosen = _where(verdicts, [family(spec_of(fields)) == label for fields in verdicts["spec_json"]])
    if chosen.empty:
        return "-", ()
    row = chosen.iloc[-1]
    return f"{row['verdict']} ({row['episodes']})", (row["key"], *row["rows"])


def hardening_frame(hardened: pd.DataFrame, verdicts: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """One line per hardened agent (see the module docstring); ``rows`` names the stored rows behind it."""
    if hardened.empty:
        return pd.DataFrame()
    if verdicts.empty:
        verdicts = pd.DataFrame(columns=["agent_hash", "settings", "spec_json", "verdict", "episodes", "rows", "key"])
    # harden certifies by PTQ (quantize and play): another method's verdicts on the same agents are not its evidence
    plain_verdicts = _where(
        verdicts,
        [
            not is_equivalence(s) and method_of(f) == "ptq"
            for s, f in zip(verdicts["settings"], verdicts["spec_json"], strict=True)
        ],
    )
    records = []
    for _, row in hardened.iterrows():
        target = spec_of(row["spec_json"])
        plain_label, target_label = family(target.weights_only()), family(target)
        against = np.array([settings.get("baseline", "") for settings in plain_verdicts["settings"]], dtype=object)
        child = plain_verdicts[
            (plain_verdicts["agent_hash"] == row["agent_hash"]).to_numpy() & (against == row["parent_hash"])
        ]
        # one certification per line: the settings of the newest verdict against the parent, both sides
        settings = _certification(child.iloc[-1]["settings"]) if len(child) else None
        same = np.array([_certification(s) == settings for s in plain_verdicts["settings"]], dtype=bool)
        parent = plain_verdicts[
            (plain_verdicts["agent_hash"] == row["parent_hash"]).to_numpy() & (against == "") & same
        ]
        child = _where(child, [_certification(s) == settings for s in child["settings"]])
        identity = np.array([spec_of(fields).is_identity for fields in child["spec_json"]], dtype=bool)
        fp32, child = child[identity], child[~identity]
        before_grid, after_grid = verdict_grid(parent), verdict_grid(child)
        target_before, before_rows = _cell(parent, target_label) if target_label != plain_label else ("-", ())
        target_after, after_rows = _cell(child, target_label) if target_label != plain_label else ("-", ())
        margins_before, margins_after = row["before"].get("margins", {}), row["after"].get("margins", {})
        weights_before, weights_after = row["before"]["weights"], row["after"]["weights"]
        fp32_text = "-"
        if len(fp32):
            last = fp32.iloc[-1]
            fp32_text = f"{last['verdict']} ({float(last['mean']):+.1f}, {last['episodes']})"
        parent_keys = [*parent["key"], *before_rows, *(k for rows in parent["rows"] for k in rows)]
        keys = [row["key"], *parent_keys, *child["key"], *fp32["key"], *after_rows]
        keys += [k for rows in (*child["rows"], *fp32["rows"]) for k in rows]
        records.append(
            {
                "parent": names.get(row["parent_hash"], str(row["parent_hash"])[:8]),
                "parent rows": " ".join(dict.fromkeys(str(k) for k in parent_keys)),
                "recipe": row["recipe"],
                "target": target_label.replace("int", target.precision, 1),
                "budget": int(row["budget"]),
                "env steps": int(row["env_steps"]),
                "fine-tune s": round(float(row["seconds"]), 1),
                "ladder": plain_label,
                f"{plain_label} before": _minimum(before_grid, plain_label),
                f"{plain_label} after": _minimum(after_grid, plain_label),
                "target before": target_before,
                "target after": target_after,
                "fp32 vs parent": fp32_text,
                "margin median before": margins_before.get("margin_median"),
                "margin median after": margins_after.get("margin_median"),
                "weight range before": weights_before["range"],
                "weight range after": weights_after["range"],
                "kurtosis before": weights_before["kurtosis"],
                "kurtosis after": weights_after["kurtosis"],
                "hardened agent": row["path"],
                "parent hash": row["parent_hash"],
                "agent hash": row["agent_hash"],
                "rows": " ".join(dict.fromkeys(str(k) for k in keys)),
            }
        )
    frame = pd.DataFrame.from_records(records)
    frame["recipe"] = _recipe_labels(hardened, frame)
    return frame


def _recipe_labels(hardened: pd.DataFrame, frame: pd.DataFrame) -> list[str]:
    """Each line's recipe, with what sets it apart from other lines of the same recipe name: the settings whose
    values differ among them (read from the stored settings, not from today's defaults) and the target."""
    labels = []
    for (_, row), target in zip(hardened.iterrows(), frame["target"], strict=True):
        same = hardened["recipe"] == row["recipe"]
        flat = [_flat(settings) for settings in hardened.loc[same, "settings"]]
        varying = sorted({k for f in flat for k in f if any(g.get(k) != f.get(k) for g in flat)})
        mine = _flat(row["settings"])
        parts = [f"{k}={mine[k]}" for k in varying if k in mine]
        if len(set(frame.loc[same.to_numpy(), "target"])) > 1:
            parts.append(target)
        labels.append(row["recipe"] + (f" [{', '.join(parts)}]" if parts else ""))
    return labels


def _flat(identity: dict) -> dict[str, object]:
    return {f"{part}.{k}": v for part, values in identity.get("settings", {}).items() for k, v in values.items()}


def hardening_report(hardened: pd.DataFrame, verdicts: pd.DataFrame, names: dict[str, str]) -> list[Table | Figure]:
    """The ``hardened_agents`` table (and its figure where a line has both minimums); nothing without hardenings."""
    frame = hardening_frame(hardened, verdicts, names)
    if frame.empty:
        return []
    caption = (
        "Hardened agents next to their parents: certified minimum safe width before (the parent against its fp32) "
        "and after (the hardened agent against the parent's fp32, same δ and paired episodes)"
    )
    items: list[Table | Figure] = [Table("hardened_agents", SECTION, frame, caption, console=True)]
    widths = width_changes(frame)
    if len(widths):
        keys = tuple(k for text in frame["rows"] for k in text.split())
        items.append(Figure("hardened_widths", SECTION, draw_width_changes, (widths,), 110, keys))
    return items


def width_changes(frame: pd.DataFrame) -> pd.DataFrame:
    """Per line, the certified minimum before and after as bits (``≤ int4``: 4, ``> int8``: 9, none: NaN)."""
    column, after = f"{frame['ladder'].iloc[0]} before", f"{frame['ladder'].iloc[0]} after"
    return pd.DataFrame(
        {
            "agent": frame["parent"],
            "recipe": frame["recipe"],
            "before": frame[column].map(width_bits),
            "after": frame[after].map(width_bits),
        }
    )


def width_bits(text: str) -> float:
    """A certified minimum's words as bits for plotting: ``int5`` 5, ``≤ int4`` 4, ``> int8`` 9 (above the ladder)."""
    import re

    found = re.search(r"(\d+)", str(text))
    if not found:
        return float("nan")
    bits = float(found.group(1))
    return bits + 1 if str(text).startswith(">") else bits


def draw_width_changes(widths: pd.DataFrame) -> Any:
    """Per agent, an arrow from the certified width before to after, one colour per recipe (legend below)."""
    import matplotlib.pyplot as plt

    agents = list(dict.fromkeys(widths["agent"]))
    recipes = list(dict.fromkeys(widths["recipe"]))
    rows = -(-len(recipes) // 2)  # legend rows, two columns
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(agents) + 1.6 + 0.25 * rows))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    step = 0.8 / max(len(recipes), 1)  # one agent's lines share 0.8 of its row
    for _, line in widths.iterrows():
        index = recipes.index(line["recipe"])
        y = agents.index(line["agent"]) + (index - (len(recipes) - 1) / 2) * step
        colour = colours[index % len(colours)]
        before, after = line["before"], line["after"]  # NaN where that side has no verdict of this certification
        if np.isfinite(before):
            ax.plot([before], [y], "o", mfc="none", color=colour, ms=4)  # hollow: before
        if np.isfinite(after):
            if np.isfinite(before) and after != before:
                ax.annotate("", (after, y), (before, y), arrowprops={"arrowstyle": "->", "color": colour})
            ax.plot([after], [y], "o", color=colour, ms=4)
    for index, recipe in enumerate(recipes):
        ax.plot([], [], "o", color=colours[index % len(colours)], label=recipe)
    ax.set_yticks(range(len(agents)), agents, fontsize=8)
    ticks = list(range(2, 10))
    ax.set_xticks(ticks, [f"int{t}" if t < 9 else "> int8" for t in ticks])
    ax.set_xlim(9.5, 1.5)  # wider on the left: hardening moves the points right
    ax.set_ylim(-0.6, len(agents) - 0.4)
    for boundary in range(len(agents) - 1):
        ax.axhline(boundary + 0.5, color="0.9", lw=0.8)
    ax.set_xlabel("certified minimum safe width (hollow: parent, filled: hardened)")
    ax.set_title("Certified width before → after hardening", fontsize=10)
    fig.legend(loc="lower center", ncol=2, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, (0.25 * rows + 0.2) / fig.get_size_inches()[1], 1, 1))
    return fig
