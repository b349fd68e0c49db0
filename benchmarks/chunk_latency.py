"""Latency of chunk artifacts on this CPU: ONNX Runtime int8 (dynamic) against fp32, and the torch policy beside
them, per chunk (one fresh chunk: the chunker's one pass, or the denoiser's whole loop) and per executed action
(along open-loop episodes: a chunk every ``execute`` steps), one thread, one observation per call, as deployed.
Each figure is the median over interleaved rounds; the CPU's int8 features are printed with them.

    python benchmarks/chunk_latency.py --models results/agents/chunked/PandaReach-v3_1/act.pt \
        results/agents/chunked/PandaReach-v3_1/diffusion.pt --env PandaReach-v3
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

BACKENDS = ("ort-fp32", "ort-int8-dynamic")


def first_observations(env_id: str, count: int) -> np.ndarray:
    env = gym.make(env_id)
    space = env.observation_space
    return np.stack([gym.spaces.flatten(space, env.reset(seed=seed)[0]) for seed in range(count)]).astype(np.float32)


def per_chunk(act, observations: np.ndarray) -> float:
    """Seconds per fresh chunk (the action of a fresh state computes one)."""
    start = time.perf_counter()
    for row in observations:
        act(row[None])
    return (time.perf_counter() - start) / len(observations)


def per_action(step, zero_state, observations: np.ndarray, steps: int) -> float:
    """Seconds per executed action along episodes of ``steps`` steps from each observation (the same observation
    played at every step: the loop's cost, not the env's)."""
    start = time.perf_counter()
    for row in observations:
        state = zero_state(1)
        for _ in range(steps):
            _, state = step(row[None], state)
    return (time.perf_counter() - start) / (len(observations) * steps)


def torch_first(policy):
    return lambda observation: policy.predict(observation)[0]


def torch_step(policy):
    """The torch policy's ``predict`` as a runner's ``step`` (``True``: a fresh state)."""
    return lambda observation, state: policy.predict(
        observation, None if state is True else state, np.array([state is True])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", type=Path, help="chunk_models .pt files (act.pt, diffusion.pt)")
    parser.add_argument("--env", default="PandaReach-v3")
    parser.add_argument("--observations", type=int, default=200)
    parser.add_argument("--steps", type=int, default=8, help="steps per episode for the per-action figure")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="untrained small models on Pendulum-v1 (the suite)")
    args = parser.parse_args()
    if not args.quick and not args.models:
        parser.error("--models is required (or --quick)")

    from quarl_bench.deploy.backends import build, runner
    from quarl_bench.deploy.chunk_artifact import ChunkForm
    from quarl_bench.deploy.machine import int8_features
    from quarl_bench.training.chunk_models import ChunkDenoiser, ChunkTransformer, load
    from quarl_bench.zoo.chunk_policies import chunked_policy, declared_chunk
    from quarl_bench.zoo.devices import one_torch_thread

    one_torch_thread()
    if args.env.startswith("Panda"):
        import panda_gym  # noqa: F401  (registers the Panda ids)
    if args.quick:
        torch.manual_seed(0)
        args.env, args.observations, args.rounds = "Pendulum-v1", 4, 2
        modules = {
            "act (untrained)": ChunkTransformer(3, 1, size=4, execute=2, width=16),
            "diffusion (untrained)": ChunkDenoiser(3, 1, size=4, execute=2, width=32),
        }
    else:
        modules = {path.stem: load(path) for path in args.models}
    env = gym.make(args.env)
    observations = first_observations(args.env, args.observations)
    features = " ".join(int8_features()) or "none"
    print(f"{args.env}; {args.observations} observations, {args.rounds} rounds, one thread; CPU int8: {features}")
    ratios = []
    for name, module in modules.items():
        policy = chunked_policy(env.observation_space, env.action_space, module, declared_chunk(module, name))
        form = ChunkForm(policy, env.observation_space)
        runs = {"torch fp32": None} | {b: runner(build(b, form, observations[:1])) for b in BACKENDS}
        chunk_times: dict[str, list[float]] = {key: [] for key in runs}
        action_times: dict[str, list[float]] = {key: [] for key in runs}
        for round_ in range(args.rounds + 1):  # interleaved (a busy moment hits every runner); the first warms up
            for key, run in runs.items():
                if run is None:
                    with torch.no_grad():
                        chunk_times[key].append(per_chunk(torch_first(policy), observations))
                        action_times[key].append(
                            per_action(torch_step(policy), lambda n: True, observations, args.steps)
                        )
                else:
                    chunk_times[key].append(per_chunk(run, observations))
                    action_times[key].append(per_action(run.step, run.zero_state, observations, args.steps))
            if round_ == 0:  # sessions and caches warmed: not counted
                for values in (*chunk_times.values(), *action_times.values()):
                    values.clear()
        chunk = {key: statistics.median(values) for key, values in chunk_times.items()}
        action = {key: statistics.median(values) for key, values in action_times.items()}
        print(f"{name}: {policy.chunk.label()}")
        for key in runs:
            print(f"  {key:17s} per chunk {chunk[key] * 1e3:8.3f} ms   per executed action {action[key] * 1e3:8.3f} ms")
        ratio = action["ort-int8-dynamic"] / action["ort-fp32"]
        print(
            f"  int8/fp32 (ORT): per chunk {chunk['ort-int8-dynamic'] / chunk['ort-fp32']:.2f}x, per action {ratio:.2f}x"
        )
        ratios.append(f"{name} {ratio:.2f}x")
    print("int8/fp32 latency per executed action: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
