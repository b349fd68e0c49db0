"""Does certify hold the error it prints? Its own decision (SequentialTest.decide_looks) on synthetic paired
differences of known mean, finite-sample (betting on return bounds) and asymptotic side by side.

Each scenario runs at the boundary (true mean -δ: P(false safe) is the share of "safe" verdicts) and at 0 (truly
safe: P(false unsafe) is the share of "unsafe"), with the median pairs to a decision, looks every 20 pairs up to
1000, one-sided α = 0.05. The asymptotic mode is also shown without its minimum number of pairs (the rule before
issue 42) and at other minimums, which is how ASYMPTOTIC_MIN_PAIRS was chosen.
Run: python benchmarks/certify_validity.py [--replications 2000] [--alpha 0.05]
"""

from __future__ import annotations

import argparse
import math

from quarl_bench.statistics.certification import ASYMPTOTIC_MIN_PAIRS, SequentialTest
from quarl_bench.statistics.validity import scenarios, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--minimums", type=int, nargs="+", default=[1, 60, ASYMPTOTIC_MIN_PAIRS, 200])
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.replications, args.minimums = 20, [60]
    alpha, reps = args.alpha, args.replications
    limit = alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)
    print(f"{reps} replications per cell; one-sided alpha {alpha}; alpha + 3 SE = {limit:.3f}\n")
    header = f"{'scenario':36s} {'delta':>6s} | {'finite-sample':^27s} | {'asymptotic, min ' + str(ASYMPTOTIC_MIN_PAIRS) + ' pairs':^27s}"
    print(header)
    print(f"{'':36s} {'':6s} | {'P(f.safe) P(f.unsafe) median':27s} | {'P(f.safe) P(f.unsafe) median':27s}")
    worst_finite = 0.0
    sweep: dict[int, float] = {}
    for scenario in scenarios():
        cells = []
        for test in (
            SequentialTest("finite-sample", alpha, scenario.bounds),
            SequentialTest("asymptotic", alpha, min_pairs=ASYMPTOTIC_MIN_PAIRS),
        ):
            wrong_safe = simulate(scenario, test, -scenario.delta, reps)
            truly_safe = simulate(scenario, test, 0.0, reps, seed=1)
            median = truly_safe.median_pairs
            cells.append(f"{wrong_safe.safe:9.3f} {truly_safe.unsafe:10.3f} {median if median else '-':>7}")
            if test.finite:
                worst_finite = max(worst_finite, wrong_safe.safe)
        for minimum in args.minimums:
            test = SequentialTest("asymptotic", alpha, min_pairs=minimum)
            sweep[minimum] = max(sweep.get(minimum, 0.0), simulate(scenario, test, -scenario.delta, reps).safe)
        print(f"{scenario.name:36s} {scenario.delta:6.2f} | {cells[0]:27s} | {cells[1]:27s}")
    print(f"\nworst P(false safe), finite-sample: {worst_finite:.3f} (valid: <= {alpha})")
    for minimum, worst in sweep.items():
        print(f"worst P(false safe), asymptotic with no decision before {minimum:4d} pairs: {worst:.3f}")


if __name__ == "__main__":
    main()
