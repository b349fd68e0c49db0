"""What hardening costs: the fine-tune's seconds per agent and recipe (median of ``--repeats`` seeds), on one torch
thread, at the study's budget (a tenth of each agent's zoo training steps), with env steps per second beside.

The fine-tune is timed inside the handler (rollouts, gradient steps; not the certification, nor loading the agent
and writing it). Each repeat writes its agent to a scratch folder and store.

    python benchmarks/harden_cost.py --zoo ../shared/zoo [--recipes distill sam] [--agents dqn:CartPole-v1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from quarl_bench import AgentQuery, QuantSpec, ResultStore, harden_agent, resolve
from quarl_bench.api.harden import zoo_steps

AGENTS = (
    "dqn:CartPole-v1",
    "dqn:Acrobot-v1",
    "dqn:MountainCar-v0",
    "dqn:LunarLander-v3",
    "qrdqn:CartPole-v1",
    "qrdqn:LunarLander-v3",
    "tqc:MountainCarContinuous-v0",
    "ddpg:LunarLanderContinuous-v3",
)
RECIPES = ("distill", "distill+noise", "sam", "noise")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), metavar="ALGO:ENV")
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES))
    parser.add_argument("--repeats", type=int, default=3, help="seeds per agent and recipe (the median is printed)")
    parser.add_argument("--share", type=float, default=0.1, help="budget: this share of the zoo's training steps")
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.agents, args.recipes, args.repeats, args.share = ["dqn:CartPole-v1"], ["distill"], 1, 0.002
    target = QuantSpec("int4", "per-channel", act_bits="int8", calibration_states=1000, calibration_method="minmax")
    print(f"{'agent':34} {'recipe':14} {'budget':>8} {'env steps':>9} {'median s':>9} {'min-max s':>13} {'steps/s':>8}")
    with tempfile.TemporaryDirectory() as scratch, ResultStore(Path(scratch) / "cost.sqlite") as store:
        for agent in args.agents:
            algo, env = agent.split(":", 1)
            ref = resolve(AgentQuery(env=env, algo=algo, folder=args.zoo, use_hub=False))
            budget = max(1, int(zoo_steps(ref) * args.share))
            for recipe in args.recipes:
                rows = [
                    harden_agent(ref, target, recipe, store, budget, Path(scratch) / f"{seed}.zip", seed, True)
                    for seed in range(args.repeats)
                ]
                seconds = [row["seconds"] for row in rows]
                median = statistics.median(seconds)
                steps = rows[0]["env_steps"]
                print(
                    f"{agent:34} {recipe:14} {budget:>8} {steps:>9} {median:>9.1f} "
                    f"{min(seconds):>6.1f}-{max(seconds):<6.1f} {steps / median:>8.0f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
