"""The sweetspot grid for zoo ppo/CartPole-v1 at 100 episodes: `quarl-bench sweep` vs the original QuaRL way.

The QuaRL way: one process per bit width that loads the agent, quantizes it and evaluates it on one env
(SB3's evaluate_policy). Same machine, one run; prints both wall times and the ratio (goal >= 10x).
Run: python benchmarks/sweep_speed.py [--zoo ../shared/zoo]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from quarl_bench.config import config_dir
from quarl_bench.jobs.grids import load_study, select

ONE_PROCESS_PER_BIT_WIDTH = """
import sys
from stable_baselines3.common.evaluation import evaluate_policy
from quarl_bench import QuantSpec
from quarl_bench.quant.quantize import quantize
from quarl_bench.zoo.agents import resolve_agent
from quarl_bench.zoo.forms import load_agent
agent = load_agent(resolve_agent("ppo", "CartPole-v1", sys.argv[1], use_hub=False))
policy, _ = quantize(agent.model.policy, QuantSpec(sys.argv[2]))
episodes = int(sys.argv[3])
rewards, _ = evaluate_policy(policy, agent.make_env(1, seed=0), n_eval_episodes=episodes, return_episode_rewards=True)
print(sys.argv[2], sum(rewards) / len(rewards))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    precisions = [c.precision for c in select(load_study(config_dir() / "sweetspot.yaml").cells, ["ppo"], ["CartPole"])]
    exe = Path(sys.executable).with_name("quarl-bench")
    episodes = 5 if args.quick else 100
    if args.quick:
        precisions = precisions[:2]

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        sweep = [
            exe,
            "sweep",
            config_dir() / "sweetspot.yaml",
            "--algo",
            "ppo",
            "--env",
            "CartPole",
            "--folder",
            args.zoo,
            "--store",
            Path(tmp) / "bench.sqlite",
            "-n",
            str(episodes),
            "--bits",
            *precisions,
        ]
        subprocess.run(sweep, check=True, capture_output=True)
        ours = time.perf_counter() - start

    start = time.perf_counter()
    for precision in precisions:
        subprocess.run(
            [sys.executable, "-c", ONE_PROCESS_PER_BIT_WIDTH, args.zoo, precision, str(episodes)],
            check=True,
            capture_output=True,
        )
    theirs = time.perf_counter() - start

    print(f"{len(precisions)} precisions x {episodes} episodes of ppo/CartPole-v1")
    print(f"quarl-bench sweep:                     {ours:7.1f} s")
    print(f"one process per bit width, one env:    {theirs:7.1f} s")
    print(f"speed-up: {theirs / ours:.1f}x (goal >= 10x)")


if __name__ == "__main__":
    main()
