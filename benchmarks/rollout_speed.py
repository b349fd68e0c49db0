"""Rollout speed of a wide PPO policy (2048x3, ActorQ's width): SB3's fp32 rollouts against quantized rollouts whose
behaviour policy runs on ONNX Runtime's int8 kernels, side by side in one run, one thread each.

Each measurement fills PPO's whole rollout buffer (8 CartPole envs x 128 steps). Acting steps/s: env steps, the
behaviour policy's forward and sampling, as an actor sees them; the last line compares the int8 actor with the fp32
actor of the same pipeline. Buffer steps/s adds what the learner needs before an update: SB3 runs actor and critic at
every step; quantized rollouts run the actor per step and the fp32 critic and log-probabilities once over the buffer
(``training/quantized_rollouts.py``), compared with SB3's own fp32 PPO. Re-quantizing after an update is timed apart.

Run: python benchmarks/rollout_speed.py [--arch 2048,2048,2048] [--n-envs 8] [--n-steps 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from stable_baselines3 import PPO

from quarl_bench.training.quantized_rollouts import RolloutPPO
from quarl_bench.zoo.quiet import silence_library_warnings


def build(algo_class: type, arch: list[int], n_envs: int, n_steps: int) -> PPO:
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=0)
    return algo_class(
        "MlpPolicy",
        env,
        n_steps=n_steps,
        batch_size=n_steps * n_envs,
        policy_kwargs={"net_arch": arch},
        seed=0,
        device="cpu",
    )


def rollout_seconds(model: PPO, repeats: int) -> tuple[float, float]:
    """Median seconds to fill the buffer once, and for quantized rollouts the acting share of it (else the same)."""
    _, callback = model._setup_learn(10**9, None)
    model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)  # warm-up
    totals, acting = [], []
    for _ in range(repeats):
        before = dict(model.timings()) if isinstance(model, RolloutPPO) else {}
        start = time.perf_counter()
        model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
        totals.append(time.perf_counter() - start)
        if before:
            acting.append(model.timings()["rollout"] - before["rollout"])
    return statistics.median(totals), statistics.median(acting) if acting else statistics.median(totals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="2048,2048,2048")
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--n-steps", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.arch, args.n_envs, args.n_steps, args.repeats = "64,64", 2, 16, 1
    silence_library_warnings()
    torch.set_num_threads(1)
    arch = [int(w) for w in args.arch.split(",")]
    steps = args.n_envs * args.n_steps
    label = "x".join(map(str, arch)) if len(set(arch)) > 1 else f"{arch[0]}x{len(arch)}"

    sb3 = build(PPO, arch, args.n_envs, args.n_steps)
    sb3_total, _ = rollout_seconds(sb3, args.repeats)
    results = {"SB3 PPO, fp32 actor + critic per step": (sb3_total, sb3_total)}
    for precision, backend in (("fp32", "torch"), ("int8", "torch"), ("int8", "onnxruntime")):
        model = build(RolloutPPO, arch, args.n_envs, args.n_steps)
        model.use_quantized_rollouts(precision, "tis", 2.0, backend)
        start = time.perf_counter()
        model.behaviour.refresh()
        requantize = time.perf_counter() - start
        total, acting = rollout_seconds(model, args.repeats)
        name = f"quantized rollouts, {precision} actor ({backend})"
        results[name] = (total, acting)
        print(f"{name}: re-quantizing after an update takes {requantize * 1000:.0f} ms")
    print(
        f"\n{steps} steps per rollout (CartPole-v1, {args.n_envs} envs), policy {label}, one thread, "
        f"median of {args.repeats}"
    )
    fp32_acting = results["quantized rollouts, fp32 actor (torch)"][1]
    print(f"{'':46s} {'acting steps/s':>15s} {'vs fp32 actor':>14s} {'buffer steps/s':>15s} {'vs SB3 fp32':>12s}")
    for name, (total, acting) in results.items():
        versus = "" if name.startswith("SB3") else f"{fp32_acting / acting:.2f}x"
        print(f"{name:46s} {steps / acting:15.0f} {versus:>14s} {steps / total:15.0f} {sb3_total / total:11.2f}x")
    _, int8_acting = results["quantized rollouts, int8 actor (onnxruntime)"]
    print(f"int8 rollouts: {fp32_acting / int8_acting:.1f}x fp32 steps/s ({label})")


if __name__ == "__main__":
    main()
