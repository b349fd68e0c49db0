"""Deployed-policy latency and size: fp32 vs every int8 backend, one run, ratios side by side.

QuaRL Table 4's Policies I, II, III (3-layer MLPs of 64, 256 and 4096-512-1024 hidden units; the paper gives only
the hidden widths, so the input is 64 features and the output 4 discrete actions here) built synthetically, and
the shared zoo's ppo/CartPole, dqn/LunarLander and ppo/Breakout (CNN). Batch 1, one thread, 1000 timed calls after
100 warm-up ones; sizes are the artifacts' bytes; peak MB is the resident memory of a fresh process that loads
and runs the artifact (ONNX Runtime or TorchScript; none for torchao's state dict). ``quarl-bench table4`` times
the same three policies and stores them for ``quarl-bench report``. Speed-ups are against torch fp32 (the SB3 policy as it runs in
PyTorch) and against ONNX Runtime fp32.

    python benchmarks/deploy_latency.py [--folder ../shared/zoo] [--calls 1000]
"""

from __future__ import annotations

import argparse
import logging
import os
import warnings
from pathlib import Path

import pandas as pd
import torch

from quarl_bench import (
    BACKEND_PRECISIONS,
    INT8_BACKENDS,
    TABLE4_POLICIES,
    config_dir,
    console,
    greedy_mlp,
    latency,
    peak_memory_mb,
    synthetic_observations,
)
from quarl_bench import artifact_runner as runner
from quarl_bench import build_artifact as build

BACKENDS = tuple(BACKEND_PRECISIONS)
INT8 = INT8_BACKENDS
ZOO_AGENTS = (("ppo", "CartPole-v1"), ("dqn", "LunarLander-v3"), ("ppo", "BreakoutNoFrameskip-v4"))


def policies(folder: Path):
    """(name, module, observations for timing and calibration) for each benchmarked policy."""
    for name, hidden in TABLE4_POLICIES.items():
        yield f"policy {name}", greedy_mlp(hidden), synthetic_observations()
    from quarl_bench import DeployablePolicy, deploy_calibration_states, load_agent, resolve_agent, split_normalizer

    for algo, env_id in ZOO_AGENTS:
        agent = load_agent(resolve_agent(algo, env_id, folder, Path("results/agents"), use_hub=False))
        env = agent.make_env(1, 0)
        raw, normalizer = split_normalizer(env)
        module = DeployablePolicy(agent.model.policy, raw.observation_space, normalizer).eval()
        env.close()
        yield f"{algo} {env_id}", module, deploy_calibration_states(agent, 256, seed=10_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, default=Path(os.environ.get("QUARL_ZOO", "../shared/zoo")))
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # onnxruntime's "consider pre-processing" advice
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    rows, summary = [], {}
    for name, module, observations in policies(args.folder):
        timings: dict[str, tuple[float, int]] = {}
        for backend in BACKENDS:
            try:
                artifact = build(backend, module, observations[:1], observations)
            except Exception as error:  # a backend that cannot run here says why; the others go on
                console.print(f"{name}: {backend} unavailable: {type(error).__name__}: {str(error).splitlines()[0]}")
                continue
            timing = latency(runner(artifact), observations[0], calls=args.calls)
            timings[backend] = (timing["p50_ms"], artifact.nbytes)
            rows.append(
                {
                    "policy": name,
                    "backend": backend,
                    "p50 ms": timing["p50_ms"],
                    "p99 ms": timing["p99_ms"],
                    "bytes": artifact.nbytes,
                    "peak MB": peak_memory_mb(artifact, observations[0]),
                }
            )
        base_ms, base_bytes = timings["torch-fp32"]
        ort_ms = timings["ort-fp32"][0]
        for row in rows:
            if row["policy"] == name:
                row["vs torch fp32"] = base_ms / row["p50 ms"]
                row["vs ort fp32"] = ort_ms / row["p50 ms"]
                row["size vs fp32"] = timings["ort-fp32"][1] / row["bytes"]
        best = min((b for b in INT8 if b in timings), key=lambda b: timings[b][0])
        speed, size = base_ms / timings[best][0], timings["ort-fp32"][1] / timings[best][1]
        summary[name] = f"{name}: int8 {speed:.1f}x faster than fp32, {size:.1f}x smaller"
        console.print(f"{summary[name]} (best int8: {best}; {ort_ms / timings[best][0]:.1f}x vs ONNX Runtime fp32)")
    console.print(pd.DataFrame(rows).round(3).to_markdown(index=False))
    paper = pd.read_csv(config_dir() / "paper" / "quarl_table4_deployment.csv")
    ours = pd.DataFrame(rows)
    console.print(
        "QuaRL Table 4 (RasPi-3b+, fp32 vs int8 weights and activations) next to this machine (x86, 1 thread):"
    )
    for _, published in paper.iterrows():
        name = published["policy"].lower()
        mine = ours[ours["policy"].str.lower() == name].set_index("backend")["p50 ms"]
        best = mine.reindex(list(INT8)).dropna()
        console.print(
            f"  {published['policy']}: paper {published['fp32_ms']} -> {published['int8_ms']} ms "
            f"({published['speedup']}x, {published['device']}); here torch fp32 {mine['torch-fp32']:.3f} -> "
            f"{best.min():.3f} ms ({mine['torch-fp32'] / best.min():.1f}x, {best.idxmin()})"
        )
    print(summary["policy III"])  # fp32 = the torch fp32 policy; size against the fp32 ONNX artifact


if __name__ == "__main__":
    main()
