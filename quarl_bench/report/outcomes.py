"""Outcomes beside the return, one line per stored row whose env reports them: the success rate with its Wilson
interval (95%), mean progress and mean summed cost (:mod:`quarl_bench.evaluation.outcomes` records them)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl_bench.report.objects import Table
from quarl_bench.store.agent_names import name_of
from quarl_bench.store.spec_kinds import method_of

SECTION = "Outcomes: success, progress, cost"
REPORTED = ("success", "progress", "cost")  # "terminated" alone is every env's, and no task outcome


def wilson_interval(successes) -> tuple[float, float]:
    """The success rate's Wilson 95% interval."""
    from scipy import stats

    hits, trials = int(round(float(np.sum(successes)))), len(successes)
    interval = stats.binomtest(hits, trials).proportion_ci(confidence_level=0.95, method="wilson")
    return float(interval.low), float(interval.high)


def success_cell(successes: list[float]) -> str:
    """``18/20 (90%, 95% CI 70-97%)``: the count, the rate and its Wilson interval."""
    hits, trials = int(round(sum(successes))), len(successes)
    low, high = wilson_interval(successes)
    return f"{hits}/{trials} ({100 * hits / trials:.0f}%, 95% CI {100 * low:.0f}-{100 * high:.0f}%)"


def outcome_report(rows: pd.DataFrame) -> list[Table]:
    """The outcomes table, or nothing when no stored row's env reports an outcome."""
    if rows.empty or "episode_outcomes" not in rows:
        return []
    records = []
    for _, row in rows.iterrows():
        outcomes = row["episode_outcomes"] if isinstance(row["episode_outcomes"], dict) else {}
        if not any(name in outcomes for name in REPORTED):
            continue
        records.append(
            {
                "agent": name_of(row),
                "method": method_of(row["spec_json"]) if isinstance(row.get("spec_json"), dict) else row["method"],
                "precision": row["precision"],
                "seed": row["seed"],
                "episodes": len(row["episode_rewards"]),
                "condition": row.get("perturbation") or "nominal",
                "judged by": row.get("judge") or "the env's info",
                "success": success_cell(outcomes["success"]) if "success" in outcomes else "-",
                "mean progress": float(np.mean(outcomes["progress"])) if "progress" in outcomes else None,
                "mean cost": float(np.mean(outcomes["cost"])) if "cost" in outcomes else None,
                "mean steps to success": float(np.mean(outcomes["steps_to_success"]))
                if "steps_to_success" in outcomes
                else None,
                "key": row["key"],
            }
        )
    if not records:
        return []
    caption = (
        "Per stored row: success (the env's info['is_success'] at each episode's end, or the function that judged "
        "it) with its Wilson 95% interval, mean progress, mean summed cost and mean steps to the first success (the "
        "episode's length where none); certify --outcome decides a quantized "
        "rate against fp32's, paired"
    )
    return [Table("outcomes", SECTION, pd.DataFrame.from_records(records), caption, console=True)]
