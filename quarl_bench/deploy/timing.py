"""Timing and weighing artifacts: batch-1 latency percentiles, batch-64 throughput, peak RSS of a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from quarl_bench.deploy.backends import Artifact

TIMED_CALLS, WARMUP_CALLS, THROUGHPUT_BATCH = 1000, 100, 64


def latency(
    run: Callable[[np.ndarray], np.ndarray],
    observation: np.ndarray,
    calls: int = TIMED_CALLS,
    warmup: int = WARMUP_CALLS,
) -> dict[str, float]:
    """p50/p99/mean milliseconds of ``calls`` batch-1 calls after ``warmup`` untimed ones."""
    batch = observation[None]
    for _ in range(warmup):
        run(batch)
    times = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter()
        run(batch)
        times[i] = time.perf_counter() - start
    return {
        "p50_ms": float(np.percentile(times, 50) * 1e3),
        "p99_ms": float(np.percentile(times, 99) * 1e3),
        "mean_ms": float(times.mean() * 1e3),
        "calls": calls,
    }


def throughput(run: Callable[[np.ndarray], np.ndarray], observations: np.ndarray, seconds: float = 1.0) -> float:
    """Observations per second at batch ``THROUGHPUT_BATCH`` (rows of ``observations`` repeated to fill it)."""
    batch = np.resize(observations, (THROUGHPUT_BATCH, *observations.shape[1:])).astype(observations.dtype)
    run(batch)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(batch)
        done += len(batch)
    return done / (time.perf_counter() - start)


PROBE_HEAD = """
import json, sys
import numpy as np
path, obs_path = sys.argv[1:3]
obs = np.load(obs_path)
"""
PROBE_TAIL = """
for _ in range(100):
    run(obs)
# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over from the forking parent across exec
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"peak_rss_mb": int(hwm.split()[1]) / 1024}))
"""


def peak_memory_mb(artifact: Artifact, observation: np.ndarray) -> float | None:
    """Peak resident memory (MB) of a fresh Python process that loads the artifact and runs it 100 times (None for
    a state-dict artifact, which needs quarl-bench's process)."""
    from quarl_bench.deploy.targets import KINDS

    kind = KINDS.get(artifact.kind)
    if not kind.probe or artifact.info("recurrent") is not None or artifact.info("chunk") is not None:
        return None  # the probe feeds one observation: a recurrent artifact takes its state, a chunk one its loop
    with tempfile.TemporaryDirectory() as folder:
        path, obs_path = Path(folder) / f"policy{artifact.suffix}", Path(folder) / "obs.npy"
        if kind.probe_file:  # what the probe loads is made from the artifact (C: the compiled library)
            path = kind.function("probe_file")(artifact, Path(folder))
        else:
            path.write_bytes(artifact.data)
        np.save(obs_path, observation[None])
        done = subprocess.run(
            [sys.executable, "-c", PROBE_HEAD + kind.probe + PROBE_TAIL, str(path), str(obs_path)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    if done.returncode != 0:
        raise RuntimeError(f"memory probe failed: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return float(result["peak_rss_mb"])
