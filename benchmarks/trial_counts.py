"""How many trials does certify spend on a success rate, against STEP's protocol and Barnard's fixed-n test?

(a) STEP's protocol (Snyder et al., RSS 2025): 45 pairs (p0, p1) on a 0.1 grid offset by 0.05, p1 > p0, one-sided
    α = 0.05; per pair, sequences under the alternative (power by the cap, mean trials to stop) and under the
    worst-case null p0 = p1 = (p0 + p1)/2 (the false-positive rate). Ours is certify's unpaired mode (``certify
    --unpaired``: independent trials, the i-th of each policy differenced), read after every trial, capped at
    ``--max-trials``; beside it, Barnard's exact test at the fewest fixed trials per policy that reach the same power.
(b) Paired scenarios, where 80-99% of pairs agree (a quantized copy and fp32 on the same seeded episodes): the
    detection question (is the quantized policy's rate below fp32's, δ = 0) with certify's paired test, against
    Barnard's fixed-n test, which cannot pair, at equal power.

Trials are counted per policy (a pair is one trial of each). Every figure is simulated on SequentialTest.decide_looks,
the decision certify takes.
Run: python benchmarks/trial_counts.py [--sequences 5000] [--max-trials 500] [--quick]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from quarl_bench.statistics.barnard import FixedTrials
from quarl_bench.statistics.trial_counts import paired, simulate, success_test, unpaired

STEP_PUBLISHED = (
    "STEP's published figures (arXiv 2503.10966, tri-ml.github.io/step): on this protocol, near-optimal power for "
    "sample complexities of ~5-500 trials, up to 40% fewer trials than prior sequential tests (SAVI, Lai), FPR "
    "held at the worst-case null. Beyond Binary Success (arXiv 2603.13616): up to 70% fewer than batch tests and "
    "50% fewer than STEP. Neither pairs the two policies."
)


def ladder(largest: int) -> list[int]:
    """The fixed sizes Barnard's regions are computed at: every 5 trials to 100, every 10 after."""
    return sorted({*range(5, min(largest, 100) + 1, 5), *range(110, largest + 1, 10)})


def step_protocol(alpha: float, sequences: int, cap: int, barnard: FixedTrials) -> tuple[float, float]:
    """Prints the table; returns the worst FPR at the null and the median ratio to Barnard's n."""
    grid = [round(0.05 + 0.1 * i, 2) for i in range(10)]
    pairs = [(p0, p1) for p0 in grid for p1 in grid if p1 > p0]
    test = success_test(alpha)
    limit = alpha + 3 * math.sqrt(alpha * (1 - alpha) / sequences)
    print(f"(a) STEP's protocol: {len(pairs)} pairs, {sequences} sequences each, cap {cap} trials per policy")
    print(f"{'p0':>5} {'p1':>5} | {'FPR':>6} {'power':>6} {'mean trials':>11} | {'Barnard n':>10} {'ours/Barnard':>12}")
    worst_fpr, ratios = 0.0, []
    for number, (p0, p1) in enumerate(pairs):
        middle = (p0 + p1) / 2
        null = simulate(unpaired(middle, middle), sequences, cap, test, 0.0, seed=2 * number)
        alternative = simulate(unpaired(p1, p0), sequences, cap, test, 0.0, seed=2 * number + 1)
        worst_fpr = max(worst_fpr, null.above)
        target = min(alternative.above, 0.99)
        n, how = barnard.trials_for(p1, p0, target)
        ratio = alternative.mean_trials / n
        ratios.append(ratio)
        shown = f"{n}" + ("*" if how != "exact" else "")
        print(
            f"{p0:5.2f} {p1:5.2f} | {null.above:6.3f} {alternative.above:6.3f} {alternative.mean_trials:11.1f} | "
            f"{shown:>10} {ratio:12.2f}"
        )
    print(f"worst FPR at the null {worst_fpr:.3f} (valid: <= {alpha}; alpha + 3 SE = {limit:.3f})")
    print(
        f"ours / Barnard's fixed n at equal power: median {np.median(ratios):.2f}, "
        f"range {min(ratios):.2f}-{max(ratios):.2f} (* Barnard n by the normal approximation)"
    )
    print(STEP_PUBLISHED + "\n")
    return worst_fpr, float(np.median(ratios))


def paired_scenarios(alpha: float, sequences: int, cap: int, barnard: FixedTrials) -> list[float]:
    """fp32 succeeds at 0.8; the quantized copy agrees on a share of pairs, the discordant ones split against it.
    Returns each scenario's ratio of mean trials to Barnard's n."""
    test = success_test(alpha)
    fp32 = 0.8
    print(
        f"(b) paired: fp32 succeeds at {fp32}; is the quantized rate below it (δ = 0)? {sequences} sequences, cap {cap}"
    )
    print(
        f"{'agree':>6} {'against':>8} {'q rate':>7} | {'power':>6} {'mean trials':>11} | {'Barnard n':>10} "
        f"{'ours/Barnard':>12}"
    )
    ratios = []
    for agreement in (0.80, 0.90, 0.95, 0.99):
        discordant = 1 - agreement
        for against in (1.0, 0.75):  # the share of discordant pairs where fp32 succeeds and the quantized fails
            fp32_only, quantized_only = discordant * against, discordant * (1 - against)
            rate = fp32 - fp32_only + quantized_only
            found = simulate(paired(quantized_only, fp32_only), sequences, cap, test, 0.0, seed=int(agreement * 100))
            n, how = barnard.trials_for(fp32, rate, min(found.below, 0.99))
            shown = f"{n}" + ("*" if how != "exact" else "")
            ratios.append(found.mean_trials / n)
            print(
                f"{agreement:6.2f} {against:8.2f} {rate:7.3f} | {found.below:6.3f} {found.mean_trials:11.1f} | "
                f"{shown:>10} {found.mean_trials / n:12.3f}"
            )
    print("(* Barnard n by the normal approximation: past the exact ladder)")
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=5000)
    parser.add_argument("--paired-sequences", type=int, default=2000)
    parser.add_argument("--max-trials", type=int, default=500)
    parser.add_argument("--paired-max-trials", type=int, default=20000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run (the suite runs it)")
    args = parser.parse_args()
    if args.quick:
        args.sequences, args.paired_sequences, args.max_trials, args.paired_max_trials = 200, 100, 100, 2000
    started = time.perf_counter()
    barnard = FixedTrials(args.alpha, ladder(200 if args.quick else 600))
    worst_fpr, unpaired_ratio = step_protocol(args.alpha, args.sequences, args.max_trials, barnard)
    paired_ratios = paired_scenarios(args.alpha, args.paired_sequences, args.paired_max_trials, barnard)
    print(f"\n{time.perf_counter() - started:.0f} s")
    print(
        f"trial counts against Barnard at equal power: paired {min(paired_ratios):.3f}-{max(paired_ratios):.3f}x, "
        f"unpaired median {unpaired_ratio:.2f}x; worst FPR at the null {worst_fpr:.3f}"
    )


if __name__ == "__main__":
    main()
