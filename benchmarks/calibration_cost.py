"""Calibration cost per zoo MLP agent: collecting the visited states (1000, the fp32 agent on seeded envs), then
GPTQ, learned rounding (AdaRound) and activation ranges (mse search, the costliest method) at int4 / A8 on them.

Each agent's components are timed in one run; the last line is the median over agents of their sum, the cost of
calibrating one agent for every calibrated method of the methods grid at one width. One torch thread (the sweep's
workers run one each). Run: python benchmarks/calibration_cost.py [--folder ../shared/zoo] [--env CartPole-v1 ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from quarl_bench import QuantSpec
from quarl_bench.evaluation.calibration import visited_states
from quarl_bench.quant.quantize import quantize
from quarl_bench.zoo.agents import resolve_agent
from quarl_bench.zoo.forms import load_agent

MLP_AGENTS = [
    ("dqn", "CartPole-v1"),
    ("ppo", "CartPole-v1"),
    ("a2c", "Acrobot-v1"),
    ("qrdqn", "LunarLander-v3"),
    ("ppo", "LunarLander-v3"),
    ("sac", "Pendulum-v1"),
    ("ddpg", "Pendulum-v1"),
    ("tqc", "MountainCarContinuous-v0"),
    ("ddpg", "LunarLanderContinuous-v3"),
    ("sac", "HalfCheetah-v4"),
    ("ppo", "BipedalWalker-v3"),
]
SPECS = {
    "gptq": QuantSpec("int4", ptq="gptq", calibration_states=1000),
    "learned-round": QuantSpec("int4", ptq="learned-round", calibration_states=1000),
    "act ranges (mse)": QuantSpec("fp32", act_bits="8", calibration_states=1000, calibration_method="mse"),
}


def seconds(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path(os.environ.get("QUARL_ZOO", "../shared/zoo")))
    parser.add_argument("--env", nargs="*", default=None, help="only these envs")
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.env = ["CartPole-v1"]
    torch.set_num_threads(1)
    totals = []
    for algo, env_id in MLP_AGENTS:
        if args.env and env_id not in args.env:
            continue
        agent = load_agent(resolve_agent(algo, env_id, args.folder, use_hub=False))
        policy = agent.model.policy
        policy.set_training_mode(False)
        collect, states = seconds(lambda a=agent, p=policy: visited_states(p, a.make_env, 1000))
        parts = {"states": collect}
        for name, spec in SPECS.items():
            parts[name] = seconds(lambda s=spec, p=policy, x=states: quantize(p, s, x))[0]
        totals.append(sum(parts.values()))
        shown = "  ".join(f"{name} {value:5.1f} s" for name, value in parts.items())
        print(f"{algo:5s} {env_id:26s} {shown}  total {totals[-1]:5.1f} s", flush=True)
    print(f"calibration: {statistics.median(totals):.1f} s per MLP agent (median)")


if __name__ == "__main__":
    main()
