"""The report's fixed-sample answer to "how many bits are safe": certify's own sequence read once on the episodes a
store holds (:func:`fixed_sample_lower`), and the minimum safe width per agent and spec it gives
(:func:`safe_bits_table`), for a store without certified verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd

from quarl_bench.precision import is_int
from quarl_bench.report.estimators import minimum_safe_bits
from quarl_bench.statistics import TOLERANCE_PCT
from quarl_bench.statistics.wording import safe_width_text

SAFE_RULE = (
    "safe: certify's confidence sequence, read once on the stored paired episodes, keeps the mean difference "
    "(quantized - fp32) above -δ, δ = {tolerance:g}% of (R_fp32 - R_random) (of |R_fp32| without a random-policy row)"
)


def safe_rule(tolerance_pct: float) -> str:
    """The report's one rule for "safe" on fixed episodes, worded for a table or figure (``--tolerance`` in it)."""
    return SAFE_RULE.format(tolerance=tolerance_pct)


def sequence_lower(value: float) -> float:
    """A statistics row's ``sequence low`` as a bound: NaN (too few pairs for the asymptotic sequence) is never safe."""
    return value if value == value else -np.inf


def fixed_sample_lower(env_id: str, differences: np.ndarray, alpha: float = 0.05) -> tuple[float, str]:
    """certify's sequence read once, after all of ``differences``: its one-sided (1 - α) lower bound on the mean
    difference and its guarantee (finite-sample on the env's return bounds, else asymptotic, which says nothing
    before its minimum pairs: NaN then)."""
    from quarl_bench.statistics.certification import SequentialTest
    from quarl_bench.zoo.return_bounds import return_bounds

    bounds = return_bounds(env_id)
    if bounds is not None:
        test = SequentialTest("finite-sample", alpha, (bounds.low, bounds.high))
        if np.all((differences >= -test.span) & (differences <= test.span)):
            return test.interval(differences).lower, "finite-sample"
    test = SequentialTest("asymptotic", alpha)
    if len(differences) < test.min_pairs:
        return float("nan"), "asymptotic"
    return test.interval(differences).lower, "asymptotic"


def too_few_pairs(env_id: str, pairs: int, delta: float, alpha: float = 0.05) -> str:
    """Why no width can be safe on ``pairs`` paired episodes, whatever their returns: identical returns would still
    leave the lower bound below -δ (and how many pairs would do), or the asymptotic sequence has too few pairs;
    empty when enough pairs could show a width safe."""
    if pairs < 1:
        return "no paired episodes"

    def enough(n: int) -> bool:
        bound = fixed_sample_lower(env_id, np.zeros(n), alpha)[0]
        return bound == bound and bound >= -delta

    if enough(pairs):
        return ""
    best = fixed_sample_lower(env_id, np.zeros(pairs), alpha)[0]
    short, needed = pairs, pairs * 2
    while not enough(needed) and needed < 1_000_000:
        short, needed = needed, needed * 2
    while needed - short > 1:  # the fewest pairs that would do, by bisection
        middle = (short + needed) // 2
        short, needed = (short, middle) if enough(middle) else (middle, needed)
    at_best = f"identical returns would give {best:+.1f}" if best == best else "too few for the asymptotic sequence"
    return f"{pairs} pairs cannot show any width safe ({at_best}, δ {delta:g}); {needed} would"


def safe_bits_table(statistics: pd.DataFrame, tolerance_pct: float = TOLERANCE_PCT) -> pd.DataFrame:
    """Per agent cell and spec: the minimum safe bit width over the integer widths measured on fixed episodes, with
    the evidence: each width's paired difference lower bound against -δ, δ = ``tolerance_pct``% of
    (R_fp32 - R_random) where a random-policy row exists (else of |R_fp32|, said in the ``δ of`` column). The same
    rule as ``certify``, read once on a fixed-n interval instead of a confidence sequence."""
    if statistics.empty:
        return pd.DataFrame()
    ints = statistics[statistics["precision"].map(is_int)]
    records = []
    for (_question, seeds), group in ints.groupby(["question", "seed list"], sort=False):
        first = group.iloc[0]
        algo, env, agent, episodes, spec = first["algo"], first["env"], first["agent"], first["episodes"], first["spec"]
        fp32_mean, delta = float(group["fp32 mean"].iloc[0]), float(group["delta"].iloc[0])
        # certify's sequence read once (a NaN bound, too few pairs for the asymptotic one, is never safe)
        lower = {int(r["bits"]): sequence_lower(float(r["sequence low"])) for _, r in group.iterrows()}
        safe = minimum_safe_bits(lower, delta)
        evidence = "; ".join(
            f"{b}: {lower[b]:+.1f}{' ok' if lower[b] >= -delta else ' below'}" for b in sorted(lower, reverse=True)
        )
        random_mean = group["random mean"].iloc[0]
        records.append(
            {
                "algo": algo,
                "env": env,
                "agent": agent,
                "episodes": episodes,
                "condition": first["condition"],
                "spec": spec,
                "seeds": len(seeds.split()),
                "seed list": seeds,
                "fp32 mean": fp32_mean,
                "tolerance %": tolerance_pct,
                "δ of": "R_fp32 - R_random" if random_mean is not None and fp32_mean > random_mean else "|R_fp32|",
                "δ": delta,
                "minimum safe bits": safe_width_text(safe, lower),
                "why": "" if safe is not None else too_few_pairs(env, int(episodes) * len(seeds.split()), delta),
                "guarantee": ", ".join(sorted(set(group["guarantee"]) - {""})),
                "sequence low per bits": evidence,
                "rows": " ".join(dict.fromkeys(key for keys in group["rows"] for key in keys.split())),
            }
        )
    return pd.DataFrame.from_records(records)
