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
from quarl_bench.statistics.validity import batch_scenarios, scenarios, simulate, simulate_batched


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
    batched(alpha, reps, limit, 200 if args.quick else 1000, 5 if args.quick else 20)
    outcomes(alpha, reps, limit, 200 if args.quick else 1000, 5 if args.quick else 20)
    for minimum, worst in sweep.items():
        print(f"worst P(false safe), asymptotic with no decision before {minimum:4d} pairs: {worst:.3f}")


def batched(alpha: float, reps: int, limit: float, max_pairs: int, checked: int) -> None:
    """Batch-structured scenarios through certify's own path: each batch stored as certify stores it (episodes in
    the order they finished), paired by ``paired_rewards``, decided by the same test; the first ``checked``
    replications of each are also driven through ``Certifier.certify`` (the driver's generator) and must agree.
    The order certify read pairs in before issue 53 (the fp32 row's stored order) is printed beside."""
    print(f"\nbatch-structured, finite-sample, at most {max_pairs} pairs; old order (finishing) | now (identity)")
    print(f"{'scenario':36s} {'delta':>6s} | {'P(f.safe) P(f.unsafe)':21s} | {'P(f.safe) P(f.unsafe)':21s} | driver")
    worst = 0.0
    for scenario in batch_scenarios():
        test = SequentialTest("finite-sample", alpha, scenario.bounds)
        cells = []
        for order in ("finishing", "identity"):
            wrong_safe = simulate_batched(scenario, test, -scenario.delta, reps, order, max_pairs=max_pairs)
            truly_safe = simulate_batched(scenario, test, 0.0, reps, order, max_pairs=max_pairs, seed=1)
            cells.append(f"{wrong_safe.safe:9.3f} {truly_safe.unsafe:11.3f}")
        worst = max(worst, wrong_safe.safe)
        agree = driver_agreement(scenario, alpha, checked, max_pairs)
        print(f"{scenario.name:36s} {scenario.delta:6.2f} | {cells[0]:21s} | {cells[1]:21s} | {agree}/{checked}")
    print(f"worst P(false safe), batch-structured, identity order: {worst:.3f} (alpha + 3 SE: {limit:.3f})")


def driver_agreement(scenario, alpha: float, replications: int, max_pairs: int, outcome: str = "return") -> int:
    """How many of the first ``replications`` boundary runs end with the same verdict through the real
    ``Certifier.certify`` generator (stored rows sent batch by batch) as through the vectorised path."""
    import numpy as np

    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.certify.plan import Certifier, Scale
    from quarl_bench.statistics.validity import batched_differences, stored_batch
    from quarl_bench.types import AgentRef, QuantSpec

    ref = AgentRef("dqn", "CartPole-v1", "CartPole-v1", "folder", "/nowhere", "0" * 64)
    if outcome == "return":
        config = CertifyConfig(
            tolerance_abs=scenario.delta,
            catastrophe=scenario.bounds[1] - scenario.bounds[0],
            max_episodes=max_pairs,
            confidence=1 - alpha,
            return_bounds=scenario.bounds,
            guarantee="finite-sample",
        )
    else:  # certify --outcome success: the rows' episode_outcomes, read by the Certifier's own outcome path
        config = CertifyConfig(
            tolerance_abs=scenario.delta, max_episodes=max_pairs, confidence=1 - alpha, outcome=outcome
        )
    test = SequentialTest("finite-sample", alpha, scenario.bounds)
    looks = np.arange(19, max_pairs, 20)
    d = batched_differences(scenario, replications, -scenario.delta, max_pairs, 20, 0, "identity")
    codes = test.decide_looks(d, scenario.delta, looks)
    rng = np.random.default_rng(0)  # the same stream batched_differences drew from
    agree = 0
    for rep in range(replications):
        decided = [int(c) for c in codes[rep] if c != 0]
        expected = {1: "safe", -1: "unsafe"}.get(decided[0] if decided else 0, "undetermined")
        walk = Certifier(ref, config).certify(
            QuantSpec("int8"), Scale(scenario.delta, "", (), np.zeros(0), np.zeros(0), None)
        )
        need, found, drawn = next(walk), None, 0
        while found is None:
            (f_rewards, f_ids), (q_rewards, q_ids) = stored_batch(scenario, rng, 20, -scenario.delta)
            drawn += 20
            rows = {
                need.jobs[0].key: stored_row("f", f_rewards, f_ids, outcome),
                need.jobs[1].key: stored_row("q", q_rewards, q_ids, outcome),
            }
            try:
                need = walk.send(rows)
            except StopIteration as done:
                found = done.value.verdict
        for _ in range(drawn, max_pairs, 20):  # keep the stream aligned with the vectorised draw
            stored_batch(scenario, rng, 20, -scenario.delta)
        agree += found == expected
    return agree


def stored_row(key: str, values: list, ids: list, outcome: str) -> dict:
    """A batch row as the store holds it: the values as returns, or as the episodes' outcome."""
    if outcome == "return":
        return {"key": key, "episode_rewards": values, "episode_ids": ids}
    return {
        "key": key,
        "episode_rewards": [0.0] * len(values),
        "episode_ids": ids,
        "episode_outcomes": {outcome: values},
    }


def outcomes(alpha: float, reps: int, limit: float, max_pairs: int, checked: int) -> None:
    """certify --outcome: success rates and progress (each episode's value in [0, 1]), paired differences at the
    boundary (-ε) and at 0; then two policies drawn independently, stored as rows with episode_outcomes and decided
    through the Certifier's outcome path (its verdicts must agree with the vectorised ones)."""
    from quarl_bench.statistics.validity import outcome_scenarios, success_batch_scenarios

    print(f"\noutcomes (certify --outcome), finite-sample on [0, 1], at most {max_pairs} pairs")
    print(f"{'scenario':40s} {'eps':>5s} | P(f.safe) P(f.unsafe) median | driver")
    worst = 0.0
    for scenario in outcome_scenarios():
        test = SequentialTest("finite-sample", alpha, scenario.bounds)
        wrong_safe = simulate(scenario, test, -scenario.delta, reps, max_pairs=max_pairs)
        truly_safe = simulate(scenario, test, 0.0, reps, max_pairs=max_pairs, seed=1)
        worst = max(worst, wrong_safe.safe)
        median = truly_safe.median_pairs
        print(
            f"{scenario.name:40s} {scenario.delta:5.2f} | {wrong_safe.safe:9.3f} {truly_safe.unsafe:10.3f} "
            f"{median if median else '-':>6} | -"
        )
    for scenario in success_batch_scenarios():
        test = SequentialTest("finite-sample", alpha, scenario.bounds)
        wrong_safe = simulate_batched(scenario, test, -scenario.delta, reps, max_pairs=max_pairs)
        truly_safe = simulate_batched(scenario, test, 0.0, reps, max_pairs=max_pairs, seed=1)
        worst = max(worst, wrong_safe.safe)
        agree = driver_agreement(scenario, alpha, checked, max_pairs, outcome="success")
        median = truly_safe.median_pairs
        print(
            f"{scenario.name:40s} {scenario.delta:5.2f} | {wrong_safe.safe:9.3f} {truly_safe.unsafe:10.3f} "
            f"{median if median else '-':>6} | {agree}/{checked}"
        )
    print(f"worst P(false safe), outcomes: {worst:.3f} (alpha + 3 SE: {limit:.3f})")


if __name__ == "__main__":
    main()
