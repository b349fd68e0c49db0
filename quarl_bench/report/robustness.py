"""How each agent's precisions hold up under the conditions it was played under (``--perturb``): one line per agent,
episode count and condition (the nominal simulator first), one column per precision, the mean return with its
bootstrap 95% interval, and the stored rows behind every cell; and a robustness curve per agent and perturbation
(each precision's mean return, and its success rate where the env reports one, against the severity, with their
95% intervals). Certify's verdicts under a condition are in the grid of certified verdicts (its ``condition``
column); these are the fixed-episode picture beside it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl_bench.perturbations import parse_perturbation
from quarl_bench.precision import precision_bits
from quarl_bench.report.estimators import bootstrap_ci
from quarl_bench.report.objects import Figure, Table
from quarl_bench.report.outcomes import SECTION
from quarl_bench.store.agent_names import name_of
from quarl_bench.store.question import with_questions


def robustness_report(rows: pd.DataFrame) -> list[Table | Figure]:
    """The robustness table and curves, or nothing when no stored row was played under a condition."""
    if rows.empty or "perturbation" not in rows or not (rows["perturbation"] != "").any():
        return []
    played = rows[(rows["method"] == "ptq") & (rows["layer_bits"] == "")]
    if "judge" in played:  # a judged row replays an unjudged one's episodes: it would count them twice
        played = played[played["judge"] == ""]
    agents = played[played["perturbation"] != ""]["agent_hash"].unique()
    played = played[played["agent_hash"].isin(agents)]
    return [robustness_table(played), *robustness_figures(played)]


def robustness_table(played: pd.DataFrame) -> Table:
    """One line per question (store/question.py: agent, episodes, recipe, condition and every other field of its
    jobs, summed over precision and seed); a column per precision, its fp32 from the line's own reference rows."""
    precisions = sorted(played["precision"].unique(), key=lambda p: -precision_bits(p))
    played = with_questions(played)
    by_key = played.set_index("key", drop=False)
    records = []
    for _question, line in played.groupby("question", sort=False):
        references = by_key.loc[[k for k in dict.fromkeys(line["reference_key"]) if k in by_key.index]]
        line = pd.concat([line, references[~references["key"].isin(line["key"])]])
        first = line.iloc[0]
        record = {"agent": name_of(first), "episodes": first["episodes"], "recipe": first["recipe"] or "-"}
        record["condition"] = first["perturbation"] or "nominal"
        record["question"] = first["question label"]
        counts = {}
        for precision in precisions:
            cells = line[line["precision"] == precision]
            if cells.empty:
                record[precision] = "-"
                continue
            rewards = np.concatenate([np.asarray(r, dtype=float) for r in cells["episode_rewards"]])
            low, high = bootstrap_ci(rewards)
            record[precision] = f"{rewards.mean():.2f} [{low:.2f}, {high:.2f}]"
            counts[precision] = len(rewards)
            if all(isinstance(o, dict) and "success" in o for o in cells["episode_outcomes"]):
                from quarl_bench.report.outcomes import wilson_interval

                hits = _successes(cells)
                low, high = wilson_interval(hits)
                record[f"{precision} success"] = f"{int(hits.sum())}/{len(hits)} [{low:.2f}, {high:.2f}]"
        # cells side by side over unequal episode sets are not paired: the line says so
        record["episodes per precision"] = (
            "equal" if len(set(counts.values())) <= 1 else ", ".join(f"{p} {n}" for p, n in counts.items())
        )
        record["rows"] = " ".join(line["key"])
        records.append(record)
    frame = pd.DataFrame.from_records(records).sort_values(
        ["agent", "episodes", "condition"], key=lambda column: column.map(lambda v: (v != "nominal", v))
    )
    caption = (
        "Mean return [bootstrap 95% CI] per precision under each condition the agent was played under (--perturb), "
        "the nominal simulator first; every condition's episodes are paired across precisions"
    )
    return Table("robustness", SECTION, frame.reset_index(drop=True), caption, console=True)


Point = tuple[float, float, float, float]  # (severity, mean, 95% low, 95% high)


def robustness_figures(played: pd.DataFrame) -> list[Figure]:
    """One figure per agent, recipe and perturbation (the condition's names: ``action-noise``): each precision's
    mean return (and success rate, where every row has one) against the severity, the nominal simulator at 0."""
    figures = []
    for (_, recipe), agent_rows in played.groupby(["agent_hash", "recipe"], sort=False):
        nominal = agent_rows[agent_rows["perturbation"] == ""]
        perturbed = agent_rows[agent_rows["perturbation"] != ""]
        axes = perturbed["perturbation"].map(_axis)
        for names, along in perturbed.groupby(axes.map(lambda axis: axis[0]), sort=True):
            curve = pd.concat([nominal, along])
            panels: dict[str, dict[str, list[Point]]] = {"mean return": _points(curve, _returns)}
            if all("success" in (o if isinstance(o, dict) else {}) for o in curve["episode_outcomes"]):
                panels["success rate"] = _points(curve, _successes)
            agent = name_of(agent_rows.iloc[0]) + (f" ({recipe})" if recipe else "")
            stem = f"robustness_{agent_rows.iloc[0]['agent_hash'][:8]}_{names.replace(',', '_')}"
            figures.append(Figure(stem, SECTION, draw_robustness, (agent, names, panels), 110, tuple(curve["key"])))
    return figures


def _axis(condition: str) -> tuple[str, float]:
    """A condition's curve and its severity along it (:meth:`~quarl_bench.perturbations.Perturbation.axis`)."""
    return parse_perturbation(condition).axis()


def _returns(line: pd.DataFrame) -> np.ndarray:
    return np.concatenate([np.asarray(r, dtype=float) for r in line["episode_rewards"]])


def _successes(line: pd.DataFrame) -> np.ndarray:
    return np.concatenate([np.asarray(o["success"], dtype=float) for o in line["episode_outcomes"]])


def _points(curve: pd.DataFrame, values_of) -> dict[str, list[Point]]:
    """Per precision, widest first: (severity, mean, 95% interval) at each severity played."""
    from quarl_bench.report.outcomes import wilson_interval

    found: dict[str, list[Point]] = {}
    for precision in sorted(curve["precision"].unique(), key=lambda p: -precision_bits(p)):
        points = []
        rows = curve[curve["precision"] == precision]
        for severity, line in rows.groupby(rows["perturbation"].map(lambda c: _axis(c)[1])):
            line = line[line["seed"].isin(_shared_seeds(curve, severity))]  # every precision's same episodes
            if line.empty:
                continue
            values = values_of(line)
            low, high = wilson_interval(values) if values_of is _successes else bootstrap_ci(values)
            points.append((float(severity), float(values.mean()), float(low), float(high)))
        found[precision] = sorted(points)
    return found


def _shared_seeds(curve: pd.DataFrame, severity: float) -> set[int]:
    """The job seeds every precision of ``curve`` played at ``severity``: a point compares paired episode sets."""
    at = curve[curve["perturbation"].map(lambda c: _axis(c)[1]) == severity]
    seeds = [set(rows["seed"]) for _, rows in at.groupby("precision")]
    return set.intersection(*seeds) if seeds else set()


def draw_robustness(agent: str, names: str, panels: dict[str, dict[str, list[Point]]]):
    """Each panel: one line per precision, its mean and 95% interval against the severity (0: nominal)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.6), squeeze=False)
    for ax, (label, lines) in zip(axes[0], panels.items(), strict=True):
        for precision, points in lines.items():
            x, mean, low, high = (np.array(column) for column in zip(*points, strict=True))
            ax.errorbar(x, mean, yerr=[mean - low, high - mean], marker="o", capsize=3, label=precision)
        ax.set_xlabel(f"{names} severity (0: nominal)")
        ax.set_ylabel(label + " (95% CI)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize="small")
    fig.suptitle(f"{agent}: robustness under {names}", fontsize="medium")
    fig.tight_layout()
    return fig
