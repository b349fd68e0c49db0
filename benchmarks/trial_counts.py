"""How many trials do quarl-bench's rate tests spend, against STEP on its own protocol and against fixed-n tests?

(a) STEP's protocol (Snyder et al., RSS 2025): 45 pairs (p0, p1) on a 0.1 grid offset by 0.05, p1 > p0, one-sided
    α = 0.05, cap 500 trials per policy, unpaired. STEP's power and mean trials per pair are the shared table
    (``zoo_configs/paper/step_reference_nmax500.csv``: STEP's own n_max 500 policy, 5,000 sequences a pair). Ours is
    ``quarl-bench trials --design unpaired --epsilon 0`` (the finite-horizon discordant-pair test,
    ``statistics/discordant.py``): its power, mean trials and the false-positive rate at each pair's null
    p0 = p1 = (p0 + p1)/2 are exact (sums of binomial probabilities, no simulation); the worst null is also simulated
    through the decision ``trials`` takes (``decide_looks``), read after every pair, with enough sequences that its
    SE is ≤ 0.002. Beside them: certify's anytime betting test (plug-in and hedged bets), simulated, and Barnard's
    exact fixed-n test at the fewest trials (found exactly) that reach our power.
(b) The margin question certify asks, paired: fp32 succeeds at 0.9, the candidate at the same rate, the two alike on
    80-99% of pairs, ε = 0.05: P(safe) and mean pairs of the anytime test (plug-in and hedged bets), against the
    exact unconditional non-inferiority test at the fewest fixed trials per policy with power 0.99.

Trials are counted per policy (a pair is one trial of each).
Run: python benchmarks/trial_counts.py [--sequences 2000] [--null-sequences 20000] [--quick]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from quarl_bench.config import config_dir
from quarl_bench.statistics.barnard import FixedTrials
from quarl_bench.statistics.certification import SequentialTest
from quarl_bench.statistics.discordant import DiscordantPairTest
from quarl_bench.statistics.trial_counts import paired, simulate, unpaired

STEP_TABLE = config_dir() / "paper" / "step_reference_nmax500.csv"


def step_protocol(
    alpha: float, cap: int, sequences: int, null_sequences: int, barnard: bool, grid_step: float
) -> dict[str, float]:
    """Prints the per-pair table; returns the summary figures."""
    step = pd.read_csv(STEP_TABLE)
    test = DiscordantPairTest(alpha, cap, "unpaired")
    bets = {bet: SequentialTest("finite-sample", alpha, (0.0, 1.0), bet=bet) for bet in ("plug-in", "hedged")}
    fixed = FixedTrials(alpha, [])
    print(f"(a) STEP's protocol: {len(step)} pairs, cap {cap} trials per policy, α {alpha}, unpaired")
    print(
        f"{'p0':>5} {'p1':>5} | {'STEP power':>10} {'trials':>7} | {'ours power':>10} {'trials':>7} {'/STEP':>6} "
        f"{'null FPR':>8} | {'plug-in':>13} {'hedged':>13} | {'Barnard n':>9}"
    )
    rows = []
    for number, pair in step.iterrows():
        p0, p1 = float(pair["p0"]), float(pair["p1"])
        ours = test.operating(p1 * (1 - p0), p0 * (1 - p1))
        middle = (p0 + p1) / 2
        null = test.operating(middle * (1 - middle), middle * (1 - middle))
        anytime = {
            bet: simulate(unpaired(p1, p0), sequences, cap, found, 0.0, seed=int(number)) for bet, found in bets.items()
        }
        n = fixed.fewest(p1, p0, min(ours.better, 0.99), cap)[0] if barnard else 0
        ratio = ours.mean_pairs / float(pair["step_mean_trials_per_policy"])
        gap = round(p1 - p0, 2)
        rows.append(
            {"gap": gap, "ratio": ratio, "power gap": ours.better - float(pair["step_power"]), "fpr": null.better}
        )
        shown = {bet: f"{found.above:.3f} {found.mean_trials:6.1f}" for bet, found in anytime.items()}
        print(
            f"{p0:5.2f} {p1:5.2f} | {pair['step_power']:10.4f} {pair['step_mean_trials_per_policy']:7.1f} | "
            f"{ours.better:10.4f} {ours.mean_pairs:7.1f} {ratio:6.2f} {null.better:8.4f} | {shown['plug-in']:>13} "
            f"{shown['hedged']:>13} | {n if barnard else '-':>9}"
        )
    table = pd.DataFrame(rows)
    # STEP's power over its 5,000 sequences: its SE, at least one sequence's worth where it reads 1.0000
    se = step["step_power"].map(lambda p: max(math.sqrt(p * (1 - p) / 5000), 1 / 5000))
    below = int((table["power gap"].round(4) < -2 * se).sum())  # the shared table gives 4 digits
    worst_exact = worst_null(test, grid_step)
    simulated = simulated_null(test, null_sequences, cap)
    limit = alpha + 3 * math.sqrt(alpha * (1 - alpha) / null_sequences)
    print(
        f"ours / STEP's mean trials: median {table['ratio'].median():.2f}, worst {table['ratio'].max():.2f}, "
        f"{int((table['ratio'] <= 1).sum())} of {len(table)} pairs at or below 1; power below STEP's by more than 2 SE "
        f"on {below} pairs (lowest gap {table['power gap'].min():+.4f})"
    )
    print(
        f"worst null: exact {worst_exact:.4f} (over independent rates p_a <= p_b on a {grid_step:g} grid); simulated "
        f"{simulated:.4f} ± {math.sqrt(simulated * (1 - simulated) / null_sequences):.4f} at p = 0.5 over "
        f"{null_sequences} sequences through decide_looks (α + 3 SE = {limit:.4f})"
    )
    ahead = table[table["ratio"] > 1].groupby("gap")["ratio"].agg(["count", "min", "max"])
    where = "; ".join(
        f"gap {g:g}: {int(r['count'])} pairs, {r['min']:.2f}-{r['max']:.2f}x" for g, r in ahead.iterrows()
    )
    print(
        f"STEP spends fewer trials on {int((table['ratio'] > 1).sum())} pairs ({where}): the small gaps, where both "
        "tests need most of the cap; STEP's policy is optimised for its own risk over this grid, ours is one "
        "Pocock-type boundary and one final look.\n"
    )
    return {
        "median": float(table["ratio"].median()),
        "worst": float(table["ratio"].max()),
        "below": float(below),
        "fpr": max(worst_exact, float(table["fpr"].max())),
    }


def worst_null(test: DiscordantPairTest, step: float) -> float:
    """The exact P("better") maximised over independent rates p_a <= p_b (the candidate no better), on a grid."""
    grid = np.arange(step, 1.0 - step / 2, step)
    return max(test.operating(a * (1 - b), b * (1 - a)).better for a in grid for b in grid if b >= a)


def simulated_null(test: DiscordantPairTest, sequences: int, cap: int) -> float:
    """P("better") at p_a = p_b = 0.5 over simulated sequences, read through ``decide_looks`` (trials' decision)."""
    rng = np.random.default_rng(7)
    wrong = 0
    for start in range(0, sequences, 4000):
        rows = min(4000, sequences - start)
        d = (rng.random((rows, cap)) < 0.5).astype(float) - (rng.random((rows, cap)) < 0.5).astype(float)
        wrong += int((test.decide_looks(d, np.array([cap - 1]))[:, 0] == 1).sum())
    return wrong / sequences


def margin_question(alpha: float, sequences: int, cap: int, exact_largest: int) -> float:
    """fp32 and the candidate both succeed at 0.9, alike on a share of pairs; is the candidate not worse by more
    than ε = 0.05? Returns the hedged bet's ratio to the fixed-n test at 90% agreement."""
    rate, margin = 0.9, 0.05
    fixed = FixedTrials(alpha, [], margin=margin, grid=100)
    n, how = fixed.fewest(rate, rate, 0.99, exact_largest)
    print(
        f"(b) paired margin question: both rates {rate}, ε {margin}, α {alpha}, cap {cap} pairs, {sequences} "
        f"sequences; the exact unconditional non-inferiority test needs n = {n} per policy for power 0.99 ({how})"
    )
    print(
        f"{'agree':>6} | {'plug-in P(safe)':>15} {'pairs':>7} {'/n':>6} | {'hedged P(safe)':>14} {'pairs':>7} {'/n':>6}"
    )
    ratio_at_90 = math.nan
    for agreement in (0.80, 0.90, 0.95, 0.99):
        discordant = (1 - agreement) / 2
        found = {
            bet: simulate(paired(discordant, discordant), sequences, cap, test, margin, seed=int(agreement * 100))
            for bet, test in (
                ("plug-in", SequentialTest("finite-sample", alpha, (0.0, 1.0))),
                ("hedged", SequentialTest("finite-sample", alpha, (0.0, 1.0), bet="hedged")),
            )
        }
        spread = {bet: f.mean_trials / n for bet, f in found.items()}
        if agreement == 0.90:
            ratio_at_90 = spread["hedged"]
        print(
            f"{agreement:6.2f} | {found['plug-in'].above:15.4f} {found['plug-in'].mean_trials:7.1f} "
            f"{spread['plug-in']:6.3f} | {found['hedged'].above:14.4f} {found['hedged'].mean_trials:7.1f} "
            f"{spread['hedged']:6.3f}"
        )
    return ratio_at_90


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=2000, help="simulated sequences per pair (anytime tests)")
    parser.add_argument("--null-sequences", type=int, default=20000, help="simulated sequences at the worst null")
    parser.add_argument("--max-trials", type=int, default=500)
    parser.add_argument("--margin-sequences", type=int, default=2000)
    parser.add_argument("--margin-max-trials", type=int, default=4000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run (the suite runs it)")
    args = parser.parse_args()
    barnard, exact_largest, grid_step = True, 1500, 0.03
    if args.quick:
        args.sequences, args.null_sequences, args.margin_sequences, args.margin_max_trials = 50, 2000, 50, 1500
        barnard, exact_largest, grid_step = False, 150, 0.1
    started = time.perf_counter()
    summary = step_protocol(args.alpha, args.max_trials, args.sequences, args.null_sequences, barnard, grid_step)
    ratio = margin_question(args.alpha, args.margin_sequences, args.margin_max_trials, exact_largest)
    print(f"\n{time.perf_counter() - started:.0f} s")
    print(
        f"trial counts against STEP: median {summary['median']:.2f}x, worst {summary['worst']:.2f}x STEP's mean "
        f"trials, power below STEP's (2 SE) on {summary['below']:.0f} of 45 pairs; worst FPR {summary['fpr']:.4f}; "
        f"paired margin, 90% alike, hedged: {ratio:.2f}x the fixed-n test"
    )


if __name__ == "__main__":
    main()
