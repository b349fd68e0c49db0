"""Evaluation near the hardware limit: quarl-bench's evaluation against stepping the same envs alone.

1. Cheap env (zoo ppo/CartPole-v1, 100 episodes over the default env count): the env-only reference steps the same
   vectorized envs for as many vector steps as the evaluation took, with pre-drawn random actions; the ratio
   evaluation / env-only is the overhead of inference and bookkeeping (goal <= 1.2x).
2. Env-bound envs (the shared zoo's ppo/Breakout, ppo/HalfCheetahBullet): one process vs ``--eval-workers <cores>``
   (forked processes, each with its share of the envs and its own copy of the policy), same seeds, and whether the
   episodes are identical (goal >= 1.7x on 2 cores).

Run: python benchmarks/eval_throughput.py [--zoo ../shared/zoo] [--episodes 100] [--atari-episodes 16]
The last line is ``eval vs env-only: N.NNx``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from quarl_bench.deploy.machine import machine_record
from quarl_bench.evaluation.evaluate import evaluate
from quarl_bench.evaluation.workers import evaluate_in_workers
from quarl_bench.jobs.grids import action_mode
from quarl_bench.zoo.agents import resolve_agent
from quarl_bench.zoo.envs import default_eval_envs
from quarl_bench.zoo.forms import load_agent


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


def workers_speedup(algo: str, env_id: str, zoo: str, episodes: int, repeats: int) -> None:
    """One process vs ``--eval-workers <cores>`` on the agent's default env count, alternated ``repeats`` times (this
    machine's timings drift by 15% between runs); env creation is timed in both, as a job does it."""
    agent = load_agent(resolve_agent(algo, env_id, zoo, use_hub=False))
    mode, n_envs, workers = action_mode(agent.ref), default_eval_envs(env_id), os.cpu_count() or 1
    ratios, identical = [], True
    for _ in range(repeats):
        start = time.perf_counter()
        env = agent.make_env(n_envs, seed=0)
        single = evaluate(agent.model.policy, env, episodes, seed=0, actions=mode)
        env.close()
        single_seconds = time.perf_counter() - start
        split = evaluate_in_workers(agent.model.policy, agent.make_env, n_envs, workers, episodes, seed=0, actions=mode)
        ratios.append(single_seconds / split.wall_seconds)
        identical &= (single.rewards, single.lengths) == (split.rewards, split.lengths)
        print(
            f"{algo}/{env_id} ({mode}), {episodes} episodes on {n_envs} envs: one process {single_seconds:.1f} s, "
            f"{workers} workers {split.wall_seconds:.1f} s; mean reward {np.mean(single.rewards):.1f}"
        )
    print(
        f"{env_id} --eval-workers {workers} speed-up: median {np.median(ratios):.2f}x "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}; goal >= 1.7x); identical episodes: {identical}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--atari-episodes", type=int, default=16)
    parser.add_argument("--bullet-episodes", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="best of N for each timing")
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.repeats = 8, 1

    agent = load_agent(resolve_agent("ppo", "CartPole-v1", args.zoo, use_hub=False))
    n_envs = default_eval_envs("CartPole-v1")
    ours, reference = [], []
    for _ in range(args.repeats):
        env = agent.make_env(n_envs, seed=0)
        episodes = evaluate(agent.model.policy, env, args.episodes, seed=0)
        env.close()
        ours.append(episodes.wall_seconds)
        reference.append(env_only_seconds(agent, n_envs, episodes.vector_steps, seed=0))
    print(
        f"CartPole-v1, {args.episodes} episodes on {n_envs} envs ({episodes.vector_steps} vector steps): evaluation "
        f"{min(ours):.3f} s, env-only {min(reference):.3f} s (best of {args.repeats})"
    )

    for algo, env_id, episodes in (
        ("ppo", "BreakoutNoFrameskip-v4", args.atari_episodes),
        ("ppo", "HalfCheetahBulletEnv-v0", args.bullet_episodes),
    ):
        if not args.quick:  # the quick run skips the worker pools
            workers_speedup(algo, env_id, args.zoo, episodes, args.repeats)
    machine = machine_record()
    print(
        f"eval vs env-only: {min(ours) / min(reference):.2f}x  "
        f"(CPU {machine['cpu']}, {machine['cpu_kind']}: {' '.join(machine['int8_features'])})"
    )


if __name__ == "__main__":
    main()
