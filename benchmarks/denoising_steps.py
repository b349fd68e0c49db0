"""Fidelity over the denoising steps of a Diffusion-Policy-shaped agent: from the same noise, the mean absolute
difference between the quantized copy's sample and fp32's after each DDIM/DDPM step, and of the executed action,
over the first observations of seeded episodes. Prints one row per step; the headline is the final chunk's error.

    python benchmarks/denoising_steps.py --model results/agents/chunked/PandaReach-v3_1/diffusion.pt \
        --env PandaReach-v3 --bits 8 4
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch


def first_observations(env_id: str, count: int, space: gym.Space) -> torch.Tensor:
    env = gym.make(env_id)
    rows = [gym.spaces.flatten(space, env.reset(seed=seed)[0]) for seed in range(count)]
    return torch.as_tensor(np.stack(rows), dtype=torch.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a chunk_models diffusion.pt")
    parser.add_argument("--env", default="PandaReach-v3")
    parser.add_argument("--bits", nargs="+", default=["8", "4"])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument(
        "--quick", action="store_true", help="an untrained denoiser on Pendulum-v1, 8 observations (the suite runs it)"
    )
    args = parser.parse_args()
    if not args.quick and args.model is None:
        parser.error("--model is required (or --quick)")

    from quarl_bench.deploy.machine import int8_features
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.training.chunk_models import ChunkDenoiser, load
    from quarl_bench.types import QuantSpec
    from quarl_bench.zoo.chunk_policies import chunked_policy, declared_chunk
    from quarl_bench.zoo.denoising import chunk_generator, episode_seed
    from quarl_bench.zoo.devices import one_torch_thread

    one_torch_thread()
    if args.env.startswith("Panda"):
        import panda_gym  # noqa: F401  (registers the Panda ids)
    if args.quick:
        torch.manual_seed(0)
        args.env, args.episodes, args.model = "Pendulum-v1", 8, "an untrained denoiser"
        module = ChunkDenoiser(obs_dim=3, action_dim=1, size=4, execute=2, width=32)
    else:
        module = load(args.model)
    env = gym.make(args.env)
    fp32 = chunked_policy(env.observation_space, env.action_space, module, declared_chunk(module, str(args.model)))
    observations = first_observations(args.env, args.episodes, env.observation_space)
    seeds = [episode_seed(row) for row in observations.numpy()]

    def trajectory(policy) -> list[torch.Tensor]:
        with torch.no_grad():
            return policy.denoise(observations, [chunk_generator(seed, 0) for seed in seeds])

    reference = trajectory(fp32)
    print(
        f"{args.model} on {args.env}: {fp32.chunk.label()}; {args.episodes} first observations; CPU int8: {' '.join(int8_features()) or 'none'}"
    )
    finals = []
    for bits in args.bits:
        quantized, _ = quantize(fp32, QuantSpec(precision=f"int{bits}"))
        samples = trajectory(quantized)
        errors = [float((q - r).abs().mean()) for q, r in zip(samples, reference, strict=True)]
        executed = float((samples[-1][:, 0].clamp(-1, 1) - reference[-1][:, 0].clamp(-1, 1)).abs().mean())
        print(f"int{bits}: mean |sample - fp32| after each step (0 = the shared noise): ")
        print("  " + " ".join(f"{step}:{error:.4f}" for step, error in enumerate(errors)))
        print(f"  executed action (first of the chunk, [-1, 1] units): {executed:.4f}")
        horizon = (samples[-1].clamp(-1, 1) - reference[-1].clamp(-1, 1)).abs().mean(dim=(0, 2))
        print("  final chunk over its horizon (action 0 = played first): " + " ".join(f"{e:.4f}" for e in horizon))
        finals.append(f"int{bits} {errors[-1]:.4f}")
    print("final chunk error vs fp32: " + ", ".join(finals))


if __name__ == "__main__":
    main()
