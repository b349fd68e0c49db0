"""Interval estimates over evaluation seeds: IQM with stratified bootstrap CIs, the paired difference to fp32,
the probability of scoring at least as well, the minimum safe bit width, and normalised aggregates across agents.

Every figure comes from named rows: a cell is one agent evaluated one way (episodes, envs, action mode, noise); its
strata are the evaluation seeds for which both the fp32 row and the quantized row exist (paired by seed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from quarl_bench.report.estimators import (
    iqm,
    normalized_scores,
    paired_difference_ci,
    performance_profile,
    probability_of_improvement,
    stratified_bootstrap_ci,
)
from quarl_bench.report.objects import Figure, Table, keys_in
from quarl_bench.report.safe_bits import fixed_sample_lower, safe_bits_table, sequence_lower
from quarl_bench.statistics import TOLERANCE_PCT
from quarl_bench.statistics.pairing import paired_rewards
from quarl_bench.store.agent_names import name_of
from quarl_bench.store.question import PRECISION, SEED, SPEC, random_question, with_questions
from quarl_bench.store.spec_kinds import input_quantization, legend_family, spec_of, variant_label, weight_method
from quarl_bench.types import QuantSpec

CELL = (
    "algo",
    "env_id",
    "agent_hash",
    "episodes",
    "n_envs",
    "action_mode",
    "epsilon",
    "quantizer_version",
    "obs_noise",
)
ACROSS_SPECS = "question across specs"
PROFILE_TAUS = np.linspace(0.0, 1.25, 51)


def env_family(env_id: str) -> str:
    """The env family an aggregate groups by, from the id alone (the report never builds envs)."""
    if env_id.startswith("dmc/"):
        return "dm-control"
    if "NoFrameskip" in env_id or env_id.startswith("ALE/"):
        return "atari"
    if "Bullet" in env_id:
        return "pybullet"
    mujoco = ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "Swimmer", "Reacher", "InvertedPendulum")
    if env_id.split("-")[0] in mujoco:
        return "mujoco"
    if env_id.split("-")[0] in ("LunarLander", "LunarLanderContinuous", "BipedalWalker", "BipedalWalkerHardcore"):
        return "box2d"
    return "classic control"


def uniform_default_ptq(frame: pd.DataFrame) -> pd.DataFrame:
    """PTQ rows of the default spec with one precision for every layer (the sweet-spot curve's points)."""
    return frame[
        (frame["method"] == "ptq")
        & (frame["layer_bits"] == "")
        & (frame["granularity"] == "auto")
        & (frame["symmetric"] == 0)
        & (frame["quantize_bias"] == 0)
        & (frame["layer_mode"] == "paper")
        & (frame["recipe"] == "")
    ]


# what a row's question is read from (store/question.py: job_of_row)
QUESTION_COLUMNS = (
    "algo",
    "env_id",
    "reference_key",
    "setting",
    "perturbation",
    "judge",
    "quantizer_version",
    "n_envs",
)
# the columns seeded statistics read besides the cell's
STATISTICS_COLUMNS = (
    "key",
    "method",
    "layer_bits",
    "precision",
    "recipe",
    "spec_json",
    "bits",
    "seed",
    "agent",
    "agent_hash",
    "episode_rewards",
    "episode_ids",
)


def in_cell(frame: pd.DataFrame, cell: pd.Series | dict) -> pd.DataFrame:
    """The rows of ``frame`` in the same agent cell (every ``CELL`` field equal) as ``cell``."""
    mask = np.ones(len(frame), dtype=bool)
    for name in CELL:
        mask &= (frame[name] == cell[name]).to_numpy()
    return frame[mask]


def paired_row_rewards(quantized: pd.Series | dict, reference: pd.Series | dict) -> tuple[np.ndarray, np.ndarray]:
    """Two stored rows' rewards on the episodes both played, matched by episode identity."""
    return paired_rewards(
        quantized["episode_rewards"], quantized["episode_ids"], reference["episode_rewards"], reference["episode_ids"]
    )


def _by_seed(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(row["seed"]): row for row in rows}  # one question's rows: one per seed (the key holds the seed)


def _is_reference(row: dict[str, Any]) -> bool:
    return row["precision"] == "fp32" and row["recipe"] == ""  # not a pruned fp32 row


def seeded_statistics(frame: pd.DataFrame, tolerance_pct: float = TOLERANCE_PCT) -> pd.DataFrame:
    """One row per question x precision (PTQ, uniform precisions; the question from the job's own fields,
    :mod:`quarl_bench.store.question`, summed over the evaluation seeds) with its paired fp32 rows: each
    quantized row's own reference row (``reference_key``), so a perturbed, judged or otherwise different row never
    meets another question's fp32.

    Columns: seeds, IQM [95% CI] (stratified over seeds), mean difference to fp32 with its paired CI, P(q >= fp32)
    (ties count half), the reward's CI lower bound (fp32 mean + lower bound of the difference), whether that is within
    ``tolerance_pct`` of fp32, the question (``question``, and what sets it apart in ``condition``) and the keys of
    the rows used.
    """
    used = [*CELL, *STATISTICS_COLUMNS, *QUESTION_COLUMNS]
    frame = frame[[c for c in dict.fromkeys(used) if c in frame.columns]]  # narrow rows: pandas per row is slow
    rows = frame[(frame["method"] == "ptq") & (frame["layer_bits"] == "")] if len(frame) else frame
    if rows.empty:
        return pd.DataFrame()
    rows = with_questions(with_questions(rows, over=(PRECISION, SEED, SPEC), column=ACROSS_SPECS))
    random = with_questions(frame[frame["method"] == "random"])
    random_by_question: dict[str, list[dict[str, Any]]] = {}
    for row in random.to_dict("records"):
        random_by_question.setdefault(row["question"], []).append(row)
    everything = rows.to_dict("records")  # plain dicts: pandas per row was most of this function's time
    by_key = {row["key"]: row for row in everything}
    questions: dict[str, list[dict[str, Any]]] = {}
    for row in everything:
        questions.setdefault(row["question"], []).append(row)
    records: list[dict[str, Any]] = []
    for group in questions.values():
        references = [row for row in group if _is_reference(row)]
        if references:
            fp32 = _by_seed(references)
            reference = [fp32[s]["episode_rewards"] for s in sorted(fp32)]
            point, low, high = stratified_bootstrap_ci(reference)
            records.append(
                _record(
                    references[0], "fp32", 32, sorted(fp32), point, low, high, [fp32[s]["key"] for s in sorted(fp32)]
                )
                | spec_kind_columns(QuantSpec())
            )
        by_precision: dict[str, list[dict[str, Any]]] = {}
        for row in group:
            if not _is_reference(row):
                by_precision.setdefault(row["precision"], []).append(row)
        for _precision, quantized in sorted(by_precision.items()):
            by_seed = _by_seed(quantized)
            fp32 = {s: by_key[row["reference_key"]] for s, row in by_seed.items() if row["reference_key"] in by_key}
            if fp32:
                records.append(_quantized_record(by_seed, fp32, random_by_question, tolerance_pct))
    return pd.DataFrame.from_records(records)


def _quantized_record(
    by_seed: dict[int, dict[str, Any]],
    fp32: dict[int, dict[str, Any]],
    random_by_question: dict[str, list[dict[str, Any]]],
    tolerance_pct: float,
) -> dict[str, Any]:
    """One question's statistics at one precision, over the seeds whose reference row is stored."""
    seeds = sorted(fp32)
    first = by_seed[seeds[0]]
    q_strata = [by_seed[s]["episode_rewards"] for s in seeds]
    r_strata = [fp32[s]["episode_rewards"] for s in seeds]
    point, low, high = stratified_bootstrap_ci(q_strata)
    fp32_mean = float(np.mean(np.concatenate(r_strata)))
    # the random policy's rows of the reference's question (the same job, played by the random method)
    random_rows = [
        row for row in random_by_question.get(random_question(fp32[seeds[0]]), []) if int(row["seed"]) in seeds
    ]
    random_mean = (
        float(np.mean(np.concatenate([row["episode_rewards"] for row in random_rows]))) if random_rows else None
    )
    delta = tolerance_of(tolerance_pct, fp32_mean, random_mean)
    try:  # the same episodes, matched by identity: the difference is resampled in pairs
        pairs = [paired_row_rewards(by_seed[s], fp32[s]) for s in seeds]
    except ValueError:  # rows stored before episode identities: no paired statistics
        pairs = []
    sequence_low, guarantee = float("nan"), ""
    if pairs and all(len(q) for q, _ in pairs):
        q_strata, r_strata = [q for q, _ in pairs], [r for _, r in pairs]
        diff, diff_low, diff_high = paired_difference_ci(q_strata, r_strata)
        improve = probability_of_improvement(q_strata, r_strata)
        sequence_low, guarantee = fixed_sample_lower(
            first["env_id"], np.concatenate(q_strata) - np.concatenate(r_strata)
        )
    else:
        diff = diff_low = diff_high = improve = float("nan")
    keys = [by_seed[s]["key"] for s in seeds] + [fp32[s]["key"] for s in seeds]
    record = _record(first, first["precision"], int(first["bits"]), seeds, point, low, high, keys)
    record |= spec_kind_columns(spec_of(first["spec_json"]), first["method"])
    return record | {
        "fp32 mean": fp32_mean,
        "random mean": random_mean,
        "delta": delta,
        "mean - fp32": diff,
        "diff low": diff_low,
        "diff high": diff_high,
        "P(q >= fp32)": improve,
        "reward CI low": fp32_mean + diff_low,
        "within tolerance": sequence_lower(sequence_low) >= -delta,  # the report's one rule
        "sequence low": sequence_low,
        "guarantee": guarantee,
    }


def spec_kind_columns(spec: QuantSpec, method: str = "ptq") -> dict[str, Any]:
    """What a statistics row measures, from its spec's fields: the weight method (None when more than weights
    changed), the one input quantized (``A 8``, ``obs 6``; ``A 32``: weights only; '' otherwise), whether any input
    is, and the frontier's legend family."""
    inputs = input_quantization(spec, method)
    return {
        "weight method": weight_method(spec),
        "input": f"{inputs[0]} {inputs[1]}" if inputs else "",
        "inputs quantized": spec.activations,
        "family": legend_family(spec),
    }


def tolerance_of(tolerance_pct: float, fp32_mean: float, random_mean: float | None) -> float:
    """The tolerance δ in reward units: ``tolerance_pct``% of (R_fp32 - R_random) where the cell has a random-policy
    row on the same seeds (``--random-baseline``) and fp32 beats it, else of |R_fp32| (QuaRL's E% scale)."""
    if random_mean is not None and fp32_mean > random_mean:
        return tolerance_pct / 100 * (fp32_mean - random_mean)
    return tolerance_pct / 100 * abs(fp32_mean)


def _record(
    row: dict[str, Any],
    precision: str,
    bits: int,
    seeds: list[int],
    point: float,
    low: float,
    high: float,
    keys: list[str],
) -> dict[str, Any]:
    """A statistics row's columns that name what it measures: the agent, the question and the spec."""
    return {
        "algo": row["algo"],
        "env": row["env_id"],
        "agent": name_of(row),
        "agent_hash": row["agent_hash"],
        "episodes": row["episodes"],
        "obs noise": row["obs_noise"],
        "question": row["question"],
        "condition": row["question label"],
        ACROSS_SPECS: row[ACROSS_SPECS],  # the question with the spec summed over (the methods table's line)
        f"{ACROSS_SPECS} label": row[f"{ACROSS_SPECS} label"],
        "spec": "default" if precision == "fp32" else variant_label(spec_of(row["spec_json"])),
        "precision": precision,
        "bits": bits,
        "seeds": len(seeds),
        "seed list": " ".join(map(str, seeds)),
        "IQM": point,
        "IQM low": low,
        "IQM high": high,
        "rows": " ".join(keys),
    }


def normalised_episodes(frame: pd.DataFrame) -> pd.DataFrame:
    """Per agent cell with a measured random policy, per uniform PTQ precision: every episode's normalised score
    (0 = that agent's random policy, 1 = its fp32 policy, both means over the same seeds' rows)."""
    if frame.empty:
        return pd.DataFrame()
    random = with_questions(frame[frame["method"] == "random"])
    records = []
    for _, cell in with_questions(uniform_default_ptq(frame)).groupby("question"):
        match = random[random["question"] == random_question(cell.iloc[0])]
        fp32 = cell[cell["precision"] == "fp32"]
        seeds = sorted(set(fp32["seed"]) & set(match["seed"]))
        if not seeds:
            continue
        fp32_mean = float(np.mean(np.concatenate(list(fp32[fp32["seed"].isin(seeds)]["episode_rewards"]))))
        random_mean = float(np.mean(np.concatenate(list(match[match["seed"].isin(seeds)]["episode_rewards"]))))
        if fp32_mean == random_mean:
            continue
        for _, row in cell[cell["seed"].isin(seeds)].iterrows():
            for score in normalized_scores(row["episode_rewards"], random_mean, fp32_mean):
                records.append(
                    {
                        "algo": row["algo"],
                        "family": env_family(row["env_id"]),
                        "env": row["env_id"],
                        "agent": name_of(row),
                        "precision": row["precision"],
                        "bits": row["bits"],
                        "seed": row["seed"],
                        "score": float(score),
                        "key": row["key"],
                    }
                )
    return pd.DataFrame.from_records(records)


def aggregate_table(scores: pd.DataFrame) -> pd.DataFrame:
    """IQM of normalised scores with a stratified bootstrap CI (strata: agents), per algo and per env family."""
    if scores.empty:
        return pd.DataFrame()
    records = []
    for by in ("algo", "family"):
        for (group, precision), rows in scores.groupby([by, "precision"]):
            strata = [list(agent["score"]) for _, agent in rows.groupby(["env", "agent"])]
            point, low, high = stratified_bootstrap_ci(strata, iqm)
            records.append(
                {
                    "group by": by,
                    "group": group,
                    "precision": precision,
                    "bits": int(rows["bits"].iloc[0]),
                    "agents": len(strata),
                    "episodes": len(rows),
                    "IQM normalised": point,
                    "CI low": low,
                    "CI high": high,
                }
            )
    return pd.DataFrame.from_records(records).sort_values(["group by", "group", "bits"], ascending=[True, True, False])


def profile_curves(scores: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per precision: the performance profile over ``PROFILE_TAUS``, each agent weighted equally (rliable)."""
    curves = {}
    for precision, rows in scores.groupby("precision"):
        per_agent = [performance_profile(agent["score"], PROFILE_TAUS) for _, agent in rows.groupby(["env", "agent"])]
        curves[precision] = np.mean(per_agent, axis=0)
    return curves


def statistics_report(
    frame: pd.DataFrame, tolerance_pct: float = TOLERANCE_PCT, statistics: pd.DataFrame | None = None
) -> list[Table | Figure]:
    """``reward_statistics``, ``minimum_safe_bits``, ``normalised_aggregates`` and the performance profile;
    nothing for a store without PTQ rows.

    :param statistics: ``seeded_statistics(frame, tolerance_pct)`` when the caller has it already.
    """
    statistics = seeded_statistics(frame, tolerance_pct) if statistics is None else statistics
    if statistics.empty:
        return []
    items: list[Table | Figure] = [
        Table(
            "reward_statistics",
            "Minimum safe bits",
            statistics,
            "IQM [95% stratified bootstrap CI over seeds]; mean - fp32 with its paired CI; P(q >= fp32), ties "
            "count half; reward CI low = fp32 mean + the difference's lower bound.",
            decimals=3,
            on_page=False,  # every spec's line: the CSV is the place to read it
        )
    ]
    safe = safe_bits_table(statistics, tolerance_pct)
    if len(safe):
        items.append(
            Table(
                "minimum_safe_bits",
                "Minimum safe bits",
                safe,
                f"Smallest integer width whose paired difference lower bound, and every wider one's, stays above -δ "
                f"(δ = {tolerance_pct:g}% of R_fp32 - R_random, or of |R_fp32| without a random baseline): certify's "
                "own sequence and guarantee (one-sided 95%), read once on the fixed episodes stored, not walked "
                "batch by batch; δ is the point estimate here. `quarl-bench certify` gives the verdicts.",
                decimals=3,
            )
        )
    scores = normalised_episodes(frame)
    if scores.empty:
        return items
    aggregates = aggregate_table(scores)
    if len(aggregates):
        items.append(
            Table(
                "normalised_aggregates",
                "Normalised scores",
                aggregates,
                "IQM of normalised scores (0 = the agent's measured random policy, 1 = its fp32 policy), "
                "stratified bootstrap 95% CI over agents.",
                decimals=3,
            )
        )
    curves = profile_curves(scores)
    order = sorted(curves, key=lambda p: -int(scores[scores["precision"] == p]["bits"].iloc[0]))
    agents = scores.groupby(["env", "agent"]).ngroups
    keys = keys_in(statistics["rows"])
    items.append(
        Figure(
            "performance_profile",
            "Normalised scores",
            draw_profile,
            ([(p, curves[p]) for p in order], agents),
            120,
            keys,
        )
    )
    return items


def draw_profile(curves: list[tuple[str, np.ndarray]], agents: int) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for precision, curve in curves:
        ax.plot(PROFILE_TAUS, curve, label=precision)
    ax.set_xlabel("normalised score tau (0 random, 1 fp32)")
    ax.set_ylabel("fraction of episodes with score > tau")
    ax.set_title(f"Performance profile, {agents} agent(s)")
    ax.legend()
    fig.tight_layout()
    return fig
