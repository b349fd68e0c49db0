"""Actor inference: one observation through the ActorQ policy (default 2048x2048x2048, CartPole's 4 -> 2) at each
actor precision and int8 backend, one thread, side by side in one run.

Picks ActorQ's default int8 backend. Run: python benchmarks/actor_inference.py [--arch 2048,2048,2048] [--batch 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from quarl_bench.actorq.policy import acting_network, actor_policy, build_policy


def ms_per_call(call: Callable[[], object], repeats: int) -> float:
    for _ in range(20):
        call()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="2048,2048,2048")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.arch, args.repeats = "64,64", 5
    torch.set_num_threads(1)
    arch = [int(w) for w in args.arch.split(",")]
    fp32 = acting_network(4, 2, arch, squash=False).eval()
    state = fp32.state_dict()
    policies = {
        "fp32 (torch)": (fp32, torch.float32),
        "fp16 (torch)": (actor_policy(acting_network(4, 2, arch, False).eval(), "fp16"), torch.float16),
        "int8 (torch dynamic quantization)": (
            build_policy(state, acting_network(4, 2, arch, False), "int8", "torch"),
            torch.float32,
        ),
        "int8 (onnxruntime MatMulInteger)": (build_policy(state, fp32, "int8", "onnxruntime"), torch.float32),
    }
    observations = torch.randn(args.batch, 4)
    timings = {}
    with torch.inference_mode():
        for name, (policy, dtype) in policies.items():
            inputs = observations.to(dtype)
            timings[name] = ms_per_call(lambda p=policy, x=inputs: p(x), args.repeats)
    base = timings["fp32 (torch)"]
    for name, ms in timings.items():
        print(f"{name:36s} {ms:7.3f} ms per call   {base / ms:5.2f}x vs fp32")


if __name__ == "__main__":
    main()
