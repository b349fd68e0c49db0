"""100-episode evaluation of zoo ppo/CartPole-v1: quarl-bench vs SB3's evaluate_policy on one env.

Run: python benchmarks/eval_throughput.py [--zoo ../shared/zoo] [--episodes 100]
Same agent, same machine, one run; prints both wall times and the ratio (goal >= 10x).
"""

from __future__ import annotations

import argparse
import os
import time

from stable_baselines3.common.evaluation import evaluate_policy

from quarl_bench.evaluate import evaluate
from quarl_bench.zoo.agents import load_agent, resolve_agent
from quarl_bench.zoo.envs import default_eval_envs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()

    agent = load_agent(resolve_agent("ppo", "CartPole-v1", args.zoo, use_hub=False))
    n_envs = default_eval_envs("CartPole-v1")

    env = agent.make_env(n_envs, seed=0)
    ours = evaluate(agent.model.policy, env, args.episodes, seed=0)
    env.close()

    single = agent.make_env(1, seed=0)  # what rl-zoo3's enjoy / a plain SB3 script does
    start = time.perf_counter()
    rewards, _ = evaluate_policy(agent.model, single, n_eval_episodes=args.episodes, return_episode_rewards=True)
    baseline_seconds = time.perf_counter() - start
    single.close()

    print(
        f"quarl-bench ({n_envs} envs, batched): {ours.wall_seconds:6.2f} s, mean reward {sum(ours.rewards) / len(ours.rewards):.1f}"
    )
    print(f"SB3 evaluate_policy (1 env):      {baseline_seconds:6.2f} s, mean reward {sum(rewards) / len(rewards):.1f}")
    print(f"speed-up: {baseline_seconds / ours.wall_seconds:.1f}x (goal >= 10x)")


if __name__ == "__main__":
    main()
