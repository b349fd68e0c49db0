"""The paper page: every published reward cell of QuaRL Table 2 and the ActorQ appendix Table 4, with what this
store measured for it and a status, and every cell of ActorQ Table 2 (times to target and speed-ups:
:func:`quarl_bench.report.actorq.actorq_paper_cells`).

The papers' claim is the error between precisions, E % = (R_fp32 - R_q) / |R_fp32| x 100, so a quantized cell is
judged on E %: *reproduced* when the paper's E % lies inside the measured E %'s paired 95% bootstrap CI (episodes
matched by identity, both members of a pair resampled together), exactly as documented (no slack); *practically
equal* when it lies outside the CI by less than the paper could print (its rewards rounded to whole numbers move
its E % by up to 100 / |R_fp32| points: :func:`paper_resolution`); *outside* otherwise (*undetermined* for rows
stored without episode identities, which cannot be paired). An fp32 cell is the *reference* its row's E % is taken
against: its absolute reward is shown beside the paper's, with the agent named, since the zoo's agents are not the
papers'. A cell the store has no agent for says so, with the hub id that would
provide it; one whose agent is here but not at that precision is *not measured*.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from quarl_bench.report.estimators import bootstrap_ci
from quarl_bench.report.objects import Table
from quarl_bench.statistics.pairing import paired_rewards
from quarl_bench.store.agent_names import row_agent_name

PAPER_TABLES = {"quarl_table2.csv": "QuaRL Table 2", "actorq_appendix_table4.csv": "ActorQ appendix Table 4"}
PRECISIONS = ("fp32", "fp16", "int8")
RESAMPLES = 2000
STATUSES = ("reproduced", "practically equal", "outside", "undetermined", "reference", "not measured", "no agent")


def published_cells(paper_dir: Path) -> pd.DataFrame:
    """One row per published reward: table, algo, env (as the paper writes it), precision, reward and E % (the
    paper's own where it prints one, else from its rewards)."""
    rows = []
    for name, table in PAPER_TABLES.items():
        path = paper_dir / name
        if not path.is_file():
            continue
        raw = pd.read_csv(path, dtype=str)
        for (_, published), (_, text) in zip(pd.read_csv(path).iterrows(), raw.iterrows(), strict=True):
            fp32 = float(published["fp32_reward"])
            for precision in PRECISIONS:
                reward = published.get(f"{precision}_reward")
                if reward is None or pd.isna(reward):
                    continue
                given = published.get(f"e_{precision}_pct")
                error = 0.0 if precision == "fp32" else (fp32 - float(reward)) / abs(fp32) * 100 if fp32 else np.nan
                rows.append(
                    {
                        "table": table,
                        "algo": str(published["algo"]).lower(),
                        "paper env": str(published["env"]),
                        "precision": precision,
                        "paper reward": float(reward),
                        "paper E %": float(given) if given is not None and not pd.isna(given) else error,
                        "paper resolution": paper_resolution(text, fp32),
                    }
                )
    return pd.DataFrame(rows)


def paper_resolution(printed: pd.Series, fp32: float) -> float:
    """How far the paper's E % may lie from the E % of its unrounded rewards: the rewards as printed (``printed``,
    the row's text) round to a unit (1 for whole numbers, 0.01 for two decimals), which moves E % = (R_fp32 - R_q) /
    |R_fp32| x 100 by up to 100 x unit / |R_fp32| points; and E % itself prints to two decimals (0.005)."""
    decimals = max(
        (len(str(value).split(".")[1]) if "." in str(value) else 0)
        for name, value in printed.items()
        if str(name).endswith("_reward") and isinstance(value, str)
    )
    unit = 10.0**-decimals
    return max(0.005, 100 * unit / abs(fp32)) if fp32 else 0.005


def paired_error_ci(quantized: np.ndarray, reference: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """E % of the paired episodes and its 95% CI: pairs resampled together (percentile bootstrap)."""
    scale = abs(reference.mean())
    if not len(reference) or scale == 0:
        return (np.nan, np.nan, np.nan)
    point = (reference.mean() - quantized.mean()) / scale * 100
    picks = np.random.default_rng(seed).integers(len(reference), size=(RESAMPLES, len(reference)))
    fp32, low = reference[picks].mean(axis=1), quantized[picks].mean(axis=1)
    draws = (fp32 - low) / np.abs(fp32).clip(min=1e-12) * 100
    return float(point), float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975))


def paper_page(selected: pd.DataFrame, paper_dir: Path) -> pd.DataFrame:
    """Every published cell (:func:`published_cells`) with the measured value from ``selected`` (one PTQ variant's
    rows, as ``ResultStore.select`` gives them) and its status (:data:`STATUSES`)."""
    from quarl_bench.config import alias_env_id

    cells = published_cells(paper_dir)
    rows = []
    for _, cell in cells.iterrows():
        env_id = alias_env_id(cell["paper env"])
        measured = (
            one_agent(selected[(selected["algo"] == cell["algo"]) & (selected["env_id"] == env_id)])
            if len(selected)
            else []
        )
        found = _measured(measured, cell["precision"]) if len(measured) else None
        base = cell.to_dict() | {"env": env_id}
        if found is None and len(measured):
            why = f"the store's {cell['algo']} {env_id} agent has no {cell['precision']} row in this variant"
            rows.append(base | {"status": "not measured", "why": why})
            continue
        if found is None:
            why = f"no {cell['algo']} {env_id} agent in this store (hub: sb3/{cell['algo']}-{env_id})"
            rows.append(base | {"status": "no agent", "why": why})
            continue
        rows.append(base | found | {"status": _status(cell, found)})
    columns = ["table", "algo", "env", "precision", "status", "paper E %", "measured E %", "E % CI low", "E % CI high"]
    columns += ["paper resolution"]
    columns += ["paper reward", "measured reward", "reward CI low", "reward CI high", "agent", "variant", "episodes"]
    columns += ["row key"]
    columns += ["why"]
    frame = pd.DataFrame(rows)
    return frame.reindex(columns=columns) if len(frame) else frame


def one_agent(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the one agent (and, where rows carry a ``variant``, the one variant) a paper row's cells come
    from: of several, the one with the most of the paper's precisions (the first, the primary variant, on a tie), so
    no row mixes two agents' or two variants' cells; a precision it lacks is *not measured*."""
    keys = ["variant", "reference_key"] if "variant" in rows else ["reference_key"]
    if rows.empty or len(rows.groupby(keys)) <= 1:
        return rows
    held = rows[rows["precision"].isin(PRECISIONS)].groupby(keys, sort=False)["precision"].nunique()
    chosen = held.idxmax()
    chosen = chosen if isinstance(chosen, tuple) else (chosen,)
    mask = np.logical_and.reduce([rows[key] == value for key, value in zip(keys, chosen, strict=True)])
    return rows[mask]


def _measured(measured: pd.DataFrame, precision: str) -> dict | None:
    """The measured cell of the first agent (reference key) that has ``precision``: rewards, paired E %, agent."""
    for _reference_key, group in measured.groupby("reference_key", sort=False):
        by_precision = group.set_index("precision")
        if precision not in by_precision.index or "fp32" not in by_precision.index:
            continue
        row, fp32 = by_precision.loc[precision], by_precision.loc["fp32"]
        low, high = bootstrap_ci(row["episode_rewards"])
        found = {
            "measured reward": float(row["mean_reward"]),
            "reward CI low": low,
            "reward CI high": high,
            "agent": row.get("agent") or row_agent_name(row),
            "variant": row.get("variant") or "default",
            "episodes": int(row["episodes"]),
            "row key": row["key"],
        }
        if precision != "fp32":
            try:
                quantized, reference = paired_rewards(
                    row["episode_rewards"], row["episode_ids"], fp32["episode_rewards"], fp32["episode_ids"]
                )
            except ValueError:  # rows stored before episode identities: the E % without a paired CI
                quantized, reference = np.array([]), np.array([])
            error, error_low, error_high = paired_error_ci(quantized, reference)
            if np.isnan(error):
                error = float(row["error_pct"])
            found |= {"measured E %": error, "E % CI low": error_low, "E % CI high": error_high}
        return found
    return None


def _status(cell: pd.Series, found: dict) -> str:
    if cell["precision"] == "fp32":
        return "reference"
    low, high = found.get("E % CI low"), found.get("E % CI high")
    if low is None or high is None or np.isnan(low):
        return "undetermined"  # rows stored before episode identities: no paired CI to judge by
    paper = cell["paper E %"]
    if low <= paper <= high:
        return "reproduced"
    distance = low - paper if paper < low else paper - high
    return "practically equal" if distance <= cell.get("paper resolution", 0.005) else "outside"


def paper_summary(page: pd.DataFrame) -> pd.DataFrame:
    """Per published table: cells reproduced, outside, reference (fp32) and without an agent."""
    if page.empty:
        return pd.DataFrame()
    counts = page.groupby(["table", "status"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=list(STATUSES), fill_value=0)
    counts["published cells"] = counts.sum(axis=1)
    return counts.reset_index()


SECTION = "The papers, cell by cell"


UNMEASURED = ("no agent", "not measured")  # a published cell this store has nothing for


def paper_page_report(
    selected: pd.DataFrame, paper_dir: Path, notes: list[str], everything: pd.DataFrame | None = None
) -> list[Table]:
    """The page's tables (a per-table summary, then every cell; ActorQ Table 2's cells from ``everything``'s
    ActorQ runs) and a console note; nothing without the papers' files."""
    from quarl_bench.report.actorq import PAPER_TABLE as ACTORQ_TABLE
    from quarl_bench.report.actorq import actorq_paper_cells

    page = paper_page(selected, paper_dir)
    actorq_cells = actorq_paper_cells(everything if everything is not None else pd.DataFrame(), paper_dir)
    if page.empty and actorq_cells.empty:
        return []
    measured = [frame[~frame["status"].isin(UNMEASURED)] for frame in (page, actorq_cells) if len(frame)]
    if not any(len(frame) for frame in measured):  # a store of other agents (a robot's): no paper table to show
        notes.append("no cell of the papers' tables was measured in this store: their tables are left out")
        return []
    summary = paper_summary(pd.concat([page, actorq_cells], ignore_index=True))
    for _, line in summary.iterrows():
        judged = (
            "speed-up against our CI over seeds"
            if line["table"] == ACTORQ_TABLE
            else "E % against the measured paired 95% CI"
        )
        others = ", ".join(f"{line[status]} {status}" for status in ("undetermined", "not measured") if line[status])
        notes.append(
            f"{line['table']}: of {line['published cells']} published cells, {line['reproduced']} reproduced and "
            f"{line['outside']} outside ({judged}), {line['reference']} fp32 references, "
            f"{line['no agent']} without an agent here{', ' + others if others else ''} "
            f"({'paper_actorq_table2' if line['table'] == ACTORQ_TABLE else 'paper_cells'}.md)"
        )
    caption = (
        "Every published reward cell. A quantized cell is judged on E % (the papers' claim): reproduced when the "
        "paper's E % lies in the measured paired 95% CI, practically equal when outside it by less than the paper's "
        "rounding could move its E % ('paper resolution', points), outside otherwise. fp32 cells are the references; "
        "absolute rewards of different agents are shown beside, never judged."
    )
    shaped = paper_shaped(page) if len(page) else pd.DataFrame(columns=["table"])
    tables = [
        Table("paper_summary", SECTION, summary, "Published cells per table, by status", console=True),
        Table("paper_cells", SECTION, page, caption),
    ]
    if len(actorq_cells):
        tables.append(Table("paper_actorq_table2", SECTION, actorq_cells, ACTORQ_CAPTION))
    for name, table in SHAPED_FILES.items():
        frame = shaped[shaped["table"] == table].drop(columns="table")
        if len(frame):
            frame = frame.set_index(frame["algo"] + " " + frame["env"]).drop(columns=["algo", "env"])
            caption = f"{table}: {PAPER_SHAPED_CAPTION}"
            tables.append(Table(name, SECTION, frame, caption, latex=True, index=True, on_page=False, decimals=None))
    return tables


ACTORQ_CAPTION = (
    "ActorQ Table 2, every published cell: the paper's time to its reward target and speed-up, ours as time to 95% "
    "of each seed's fp32 run and its speed-up with a bootstrap CI over seeds; undetermined (the why column says "
    "why) where our runs give no such CI"
)
SHAPED_FILES = {"paper_table2": "QuaRL Table 2", "paper_actorq_appendix": "ActorQ appendix Table 4"}


PAPER_SHAPED_CAPTION = (
    "the paper's rows and columns, the paper's value then ours; E % with its paired 95% CI; '-' where this store has "
    "no agent"
)


def paper_shaped(page: pd.DataFrame) -> pd.DataFrame:
    """The published tables' own shape: one line per published (algo, env), in the paper's order; per precision
    the paper's figure and ours side by side (fp32 rewards; E % for fp16 and int8, ours with its CI)."""
    records = []
    for (table, algo, env), cells in page.groupby(["table", "algo", "env"], sort=False):
        by_precision = cells.set_index("precision")
        record = {"table": table, "algo": algo, "env": env}
        for precision in PRECISIONS:
            if precision not in by_precision.index:
                continue
            cell = by_precision.loc[precision]
            if precision == "fp32":
                record["fp32 paper"] = f"{cell['paper reward']:.0f}"
                record["fp32 ours"] = "-" if pd.isna(cell["measured reward"]) else f"{cell['measured reward']:.1f}"
                continue
            record[f"E {precision} % paper"] = f"{cell['paper E %']:.2f}"
            record[f"E {precision} % ours"] = _error_text(cell)
        record["agent"] = next((a for a in cells["agent"] if isinstance(a, str) and a), "-")
        records.append(record)
    return pd.DataFrame.from_records(records)


def _error_text(cell: pd.Series) -> str:
    if pd.isna(cell.get("measured E %")):
        return "-"
    text = f"{cell['measured E %']:.2f}"
    if not pd.isna(cell.get("E % CI low")):
        text += f" [{cell['E % CI low']:.2f}, {cell['E % CI high']:.2f}]"
    return text
