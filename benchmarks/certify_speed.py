"""Certify vs the fixed protocol on ten zoo agents: episodes, wall time, and whether the answer repeats.

For each agent, widths 8 6 5 4 3 2 (fp32 the reference): `certify` at two independent seed bases (0 and 5000),
and the fixed protocol (100 episodes per width at seed 0, the minimum safe width read from the per-width means).
Prints per agent the certified minimum width at both bases, contradictions (a width safe in one run and unsafe in the
other), and the episodes (every one played: fp32 and quantized batches and the scale set) and seconds of each
approach, per median agent and as means with their ratio. Every row lands in one store.
Run: python benchmarks/certify_speed.py [--zoo ../shared/zoo] [--max-episodes 1000] [--store /tmp/certify.sqlite]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from quarl_bench import (
    AgentQuery,
    CertifyConfig,
    EvalSettings,
    QuantSpec,
    ResultStore,
    certify_agent,
    run_ptq,
)
from quarl_bench import resolve as find_agent

AGENTS = (
    ("ppo", "LunarLander-v3"),
    ("a2c", "LunarLander-v3"),
    ("dqn", "LunarLander-v3"),
    ("a2c", "Acrobot-v1"),
    ("ppo", "Acrobot-v1"),
    ("qrdqn", "Acrobot-v1"),
    ("ppo", "Pendulum-v1"),
    ("sac", "Pendulum-v1"),
    ("ddpg", "LunarLanderContinuous-v3"),
    ("dqn", "CartPole-v1"),
)
WIDTHS = ("int8", "int6", "int5", "int4", "int3", "int2")
SEED_BASES = (0, 5000)
FIXED_EPISODES = 100


def fixed_minimum(rows: list[dict], delta: float) -> str | None:
    """The fixed protocol's answer: the narrowest width whose mean, and every wider one's, is within δ of fp32."""
    fp32 = next(r["mean_reward"] for r in rows if r["precision"] == "fp32")
    safe = None
    for width in WIDTHS:
        mean = next(r["mean_reward"] for r in rows if r["precision"] == width)
        if mean < fp32 - delta:
            break
        safe = width
    return safe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--max-episodes", type=int, default=1000)
    parser.add_argument("--store", type=Path, default=Path(tempfile.mkdtemp()) / "certify.sqlite")
    parser.add_argument("--agents", nargs="*", default=None, help="algo/env pairs, e.g. dqn/CartPole-v1")
    args = parser.parse_args()
    torch.set_num_threads(1)
    agents = [tuple(a.split("/")) for a in args.agents] if args.agents else AGENTS
    specs = tuple(QuantSpec(w) for w in WIDTHS)
    totals = {"certify episodes": 0, "certify s": 0.0, "fixed episodes": 0, "fixed s": 0.0}
    agree = contradictions = undetermined = 0
    decided_episodes: list[int] = []
    per_run: list[tuple[int, float]] = []  # (episodes, seconds) of each certify run
    fixed_runs: list[float] = []
    all_zero: list[tuple[int, int, bool]] = []  # (episodes, floor, within 1.5x floor) of widths with all-zero pairs
    with ResultStore(args.store) as store:
        for algo, env in agents:
            ref = find_agent(AgentQuery(env, algo, folder=args.zoo, use_hub=False))
            answers, verdicts = [], []
            for base in SEED_BASES:
                config = CertifyConfig(seed=base, max_episodes=args.max_episodes)
                start = time.perf_counter()
                result = certify_agent(ref, specs, config, store)
                seconds = time.perf_counter() - start
                totals["certify s"] += seconds
                # every episode played: the batches behind the verdicts (fp32 and quantized) and the scale set's
                played = {key for v in result.verdicts for key in v.rows} | set(result.scale_rows)
                episodes = sum(store.get(key)["episodes"] for key in played)
                totals["certify episodes"] += episodes
                per_run.append((episodes, seconds))
                answers.append(result.minimum_safe)
                verdicts.append({v.spec: v.verdict for v in result.verdicts})
                decided_episodes += [v.episodes for v in result.verdicts if v.verdict != "undetermined"]
                undetermined += any(v.verdict == "undetermined" for v in result.verdicts) and base == SEED_BASES[0]
                line = " ".join(f"{v.spec}:{v.verdict[0]}{v.episodes}" for v in result.verdicts)
                floor = next((v.evidence.get("minimum_episodes") for v in result.verdicts), None)
                print(
                    f"{algo}/{env} base {base}: minimum {result.minimum_safe} (delta {result.delta:.2f}, "
                    f"{result.guarantee}, floor {floor or '-'}) {line}"
                )
                for v in result.verdicts:  # identical play: decided within 1.5x its floor, rounded up to a batch?
                    if v.evidence.get("nonzero_pairs") == 0 and v.evidence.get("minimum_episodes"):
                        budget = -(-1.5 * v.evidence["minimum_episodes"] // config.batch) * config.batch
                        all_zero.append((v.episodes, v.evidence["minimum_episodes"], v.episodes <= budget))
            both = set(verdicts[0]) & set(verdicts[1])
            clash = sum({verdicts[0][w], verdicts[1][w]} == {"safe", "unsafe"} for w in both)
            contradictions += clash
            agree += answers[0] == answers[1]
            start = time.perf_counter()
            rows = run_ptq(ref, specs, EvalSettings(FIXED_EPISODES, 0), store)
            fixed_runs.append(time.perf_counter() - start)
            totals["fixed s"] += fixed_runs[-1]
            totals["fixed episodes"] += FIXED_EPISODES * (len(WIDTHS) + 1)
            print(
                f"  fixed protocol ({FIXED_EPISODES} episodes per width): minimum {fixed_minimum(rows, result.delta)}"
            )
    runs = len(agents) * len(SEED_BASES)
    print(f"same certified minimum at both seed bases: {agree} of {len(agents)}; contradictions: {contradictions}")
    print(f"agents with an undetermined width (base {SEED_BASES[0]}): {undetermined} of {len(agents)}")
    print(f"median episodes per decided width: {statistics.median(decided_episodes) if decided_episodes else '-'}")
    if all_zero:
        within = sum(ok for _, _, ok in all_zero)
        print(
            f"widths with all-zero differences (finite-sample): {len(all_zero)}, decided within 1.5x their floor "
            f"(rounded up to a batch): {within}; median episodes {statistics.median(e for e, _, _ in all_zero):.0f} "
            f"against a median floor of {statistics.median(f for _, f, _ in all_zero):.0f}"
        )
    print(
        f"certify: {totals['certify episodes'] / runs:.0f} episodes and {totals['certify s'] / runs:.1f} s per agent "
        f"and seed base; fixed protocol: {totals['fixed episodes'] / len(agents):.0f} episodes and "
        f"{totals['fixed s'] / len(agents):.1f} s per agent"
    )
    print(
        f"median agent: certify {statistics.median(e for e, _ in per_run):.0f} episodes and "
        f"{statistics.median(s for _, s in per_run):.1f} s; fixed {FIXED_EPISODES * (len(WIDTHS) + 1)} episodes and "
        f"{statistics.median(fixed_runs):.1f} s"
    )
    print(
        f"ratio fixed / certify: {totals['fixed episodes'] / len(agents) / (totals['certify episodes'] / runs):.2f}x "
        f"episodes, {totals['fixed s'] / len(agents) / (totals['certify s'] / runs):.2f}x wall time (means over agents)"
    )


if __name__ == "__main__":
    main()
