"""QuaRL Table 4's synthetic policies I, II, III, timed per backend: fp32 vs int8 latency, bytes and memory.

The paper gives only the hidden widths (3-layer MLPs of 64; 256; 4096-512-1024 units, timed on a RasPi-3b+); the
input here is 64 features and the output 4 discrete actions (argmax inside the artifact). Weights are seeded, so
every machine times the same policy.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import datetime, timezone
from typing import Any

import numpy as np

TABLE4_POLICIES: dict[str, tuple[int, ...]] = {"I": (64, 64, 64), "II": (256, 256, 256), "III": (4096, 512, 1024)}
INPUTS, ACTIONS, WEIGHT_SEED, SAMPLES = 64, 4, 0, 256
TIMING_VERSION = 1  # bump when what a timing row measures changes


def greedy_mlp(hidden: tuple[int, ...], inputs: int = INPUTS, actions: int = ACTIONS):
    """A seeded MLP with ReLU whose forward returns the argmax action, as a deployed discrete policy does."""
    import torch
    from torch import nn

    from quarl_bench.deploy.export import TorchForm

    class GreedyMLP(TorchForm, nn.Module):
        image, normalize, discrete = False, False, True

        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            width_in = inputs
            for width in hidden:
                layers += [nn.Linear(width_in, width), nn.ReLU()]
                width_in = width
            self.net = nn.Sequential(*layers, nn.Linear(width_in, actions))

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return torch.argmax(self.net(obs), dim=1)

        def written_chain(self) -> tuple[list[nn.Module], str, int]:
            return list(self.net), "argmax", 1

    torch.manual_seed(WEIGHT_SEED)
    return GreedyMLP().eval()


def observations(count: int = SAMPLES) -> np.ndarray:
    """Seeded standard-normal inputs: the timing sample and the static-int8 calibration set."""
    return np.random.default_rng(WEIGHT_SEED).standard_normal((count, INPUTS), np.float32)


def machine() -> str:
    """This machine in words: CPU model, core count and the kind of int8 kernels it gets (part of a timing row's
    identity, so timings of a VNNI and an AVX2 machine are never one cell; the paper's column is its RasPi)."""
    from quarl_bench.deploy.machine import cpu_kind, int8_features

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    features = " ".join(int8_features()) or "none"
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, int8 {cpu_kind()} ({features})"


def timing_key(policy: str, backend: str, calls: int, host: str, versions: dict[str, str]) -> str:
    """One row per policy x backend x call count x machine x library versions: a rerun reuses it."""
    identity = {
        "policy": policy,
        "hidden": TABLE4_POLICIES[policy],
        "inputs": INPUTS,
        "actions": ACTIONS,
        "weight_seed": WEIGHT_SEED,
        "backend": backend,
        "calls": calls,
        "machine": host,
        "versions": {k: versions.get(k) for k in ("torch", "onnxruntime", "torchao")},
        "timing_version": TIMING_VERSION,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def time_policy(policy: str, backend: str, calls: int, key: str, provenance: dict[str, Any]) -> dict[str, Any]:
    """Build ``backend``'s artifact of Table 4 policy ``policy`` and time it (one thread, batch 1; batch 64),
    weigh it (bytes, fresh-process peak RSS). Returns the timing row.

    :raises QuarlError: when the backend cannot be built here.
    """
    from quarl_bench.deploy.backends import build, runner
    from quarl_bench.deploy.machine import load_record
    from quarl_bench.deploy.timing import latency, peak_memory_mb, throughput
    from quarl_bench.evaluation.evaluate import torch_thread_count

    module, sample = greedy_mlp(TABLE4_POLICIES[policy]), observations()
    artifact = build(backend, module, sample[:1], sample, "minmax", sample)
    with torch_thread_count(1):
        run = runner(artifact, threads=1)
        timing = latency(run, sample[0], calls=calls)
        timing["batch64_obs_per_s"] = throughput(run, sample)
    provenance = provenance | {"load": load_record()}
    return {
        "key": key,
        "policy": policy,
        "hidden": list(TABLE4_POLICIES[policy]),
        "backend": backend,
        "machine": provenance["host"],
        "threads": 1,
        "calls": calls,
        "p50_ms": timing["p50_ms"],
        "p99_ms": timing["p99_ms"],
        "mean_ms": timing["mean_ms"],
        "batch64_obs_per_s": timing["batch64_obs_per_s"],
        "artifact_bytes": artifact.nbytes,
        "artifact_sha256": artifact.sha256,
        "peak_rss_mb": peak_memory_mb(artifact, sample[0]),
        "provenance": provenance,
        "created_at": datetime.now(timezone.utc).isoformat(),
    }
