"""Evaluation near the hardware limit: quarl-bench's evaluation against stepping the same envs alone.

1. Cheap env (zoo ppo/CartPole-v1, 100 episodes over the default env count): the env-only reference steps the same
   vectorized envs for as many vector steps as the evaluation took, with pre-drawn random actions; the ratio
   evaluation / env-only is the overhead of inference and bookkeeping (goal <= 1.2x).
2. Env-bound env (the shared zoo's ppo/Breakout): one process vs the envs in subprocesses (``--eval-workers``),
   same seeds, and whether the episodes are identical (goal >= 1.7x on 2 cores).

Run: python benchmarks/eval_throughput.py [--zoo ../shared/zoo] [--episodes 100] [--atari-episodes 8]
The last line is ``eval vs env-only: N.NNx``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from quarl_bench.evaluate import evaluate
from quarl_bench.registry import action_mode
from quarl_bench.zoo.agents import load_agent, resolve_agent
from quarl_bench.zoo.envs import default_eval_envs


def env_only_seconds(agent, n_envs: int, vector_steps: int, seed: int) -> float:
    """Wall time of ``vector_steps`` steps of the agent's envs with pre-drawn random actions."""
    env = agent.make_env(n_envs, seed)
    env.action_space.seed(seed)
    actions = [np.array([env.action_space.sample() for _ in range(n_envs)]) for _ in range(vector_steps)]
    env.reset()
    start = time.perf_counter()
    for action in actions:
        env.step(action)
    seconds = time.perf_counter() - start
    env.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--atari-episodes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="best of N for each timing")
    args = parser.parse_args()

    agent = load_agent(resolve_agent("ppo", "CartPole-v1", args.zoo, use_hub=False))
    n_envs = default_eval_envs("CartPole-v1")
    ours, reference = [], []
    for _ in range(args.repeats):
        env = agent.make_env(n_envs, seed=0)
        episodes = evaluate(agent.model.policy, env, args.episodes, seed=0)
        env.close()
        ours.append(episodes.wall_seconds)
        reference.append(env_only_seconds(agent, n_envs, episodes.vector_steps, seed=0))
    print(f"CartPole-v1, {args.episodes} episodes on {n_envs} envs ({episodes.vector_steps} vector steps): evaluation "
          f"{min(ours):.3f} s, env-only {min(reference):.3f} s (best of {args.repeats})")  # fmt: skip

    atari = load_agent(resolve_agent("ppo", "BreakoutNoFrameskip-v4", args.zoo, use_hub=False))
    mode = action_mode(atari.ref)
    results = {}
    for workers, subprocess in (("1 process", False), (f"{os.cpu_count()} cores, subprocesses", True)):
        env = atari.make_env(args.atari_episodes, seed=0, subprocess=subprocess)
        found = evaluate(atari.model.policy, env, args.atari_episodes, seed=0, actions=mode, model=atari.model)
        env.close()
        results[workers] = found
        print(f"Breakout, {args.atari_episodes} episodes on {args.atari_episodes} envs, {workers}: "
              f"{found.wall_seconds:.1f} s, {sum(found.lengths)} steps, rewards {found.rewards}")  # fmt: skip
    single, multi = results.values()
    identical = sorted(single.rewards) == sorted(multi.rewards) and sorted(single.lengths) == sorted(multi.lengths)
    print(f"Breakout --eval-workers speed-up: {single.wall_seconds / multi.wall_seconds:.2f}x (goal >= 1.7x); "
          f"identical episodes: {identical}")  # fmt: skip
    print(f"eval vs env-only: {min(ours) / min(reference):.2f}x")


if __name__ == "__main__":
    main()
