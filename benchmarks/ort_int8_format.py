"""What the portable ORT int8 format costs: uint8 weights (zero point 128; u8 x u8 kernels, exact on every CPU)
against ORT's default int8 weights (u8 x s8: VNNI's vpdpbusd, or AVX2's saturating vpmaddubsw), batch-1 p50 latency on
one thread for QuaRL Table 4's policies, both formats side by side in one run, with the CPU's int8 features.

    python benchmarks/ort_int8_format.py [--calls 1000] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from quarl_bench.deploy.backends import Artifact, runner
from quarl_bench.deploy.export import to_onnx
from quarl_bench.deploy.machine import machine_record
from quarl_bench.deploy.ort_int8 import ort_int8
from quarl_bench.deploy.synthetic import TABLE4_POLICIES, greedy_mlp, observations
from quarl_bench.deploy.timing import latency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="timed batch-1 calls per policy and format")
    parser.add_argument("--backend", default="ort-int8-static", choices=("ort-int8-static", "ort-int8-dynamic"))
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    policies = ["I"] if args.quick else list(TABLE4_POLICIES)
    calls = 20 if args.quick else args.calls
    torch.set_num_threads(1)
    states = observations()
    machine = machine_record()
    print(f"CPU {machine['cpu']} ({machine['cpu_kind']}: {' '.join(machine['int8_features'])}), {args.backend}")
    ratios = {}
    for name in policies:
        fp32 = to_onnx(greedy_mlp(TABLE4_POLICIES[name]).eval(), states[:1])
        timed = {}
        for label, signed in (("uint8 weights", False), ("int8 weights", True)):
            graph = ort_int8(args.backend, fp32, states, "minmax", signed=signed)
            timed[label] = latency(runner(Artifact(args.backend, "onnx", graph)), states[0], calls)["p50_ms"]
        ratios[name] = timed["uint8 weights"] / timed["int8 weights"]
        shown = "  ".join(f"{label} {ms:.3f} ms" for label, ms in timed.items())
        print(f"policy {name} {TABLE4_POLICIES[name]}: {shown}  uint8 / int8 {ratios[name]:.2f}x")
    worst = max(ratios, key=ratios.get)
    print(
        f"portable uint8 weights: {ratios[worst]:.2f}x the int8 format's latency at worst (policy {worst}, "
        f"{machine['cpu_kind']})"
    )


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
