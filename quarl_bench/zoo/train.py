"""Train an fp32 baseline with rl-zoo3's tuned hyperparameters, saved in the rl-zoo3 layout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from quarl_bench.errors import QuarlError


def train_baseline(algo: str, env_id: str, cache_dir: Path, seed: int = 0, n_timesteps: int | None = None) -> None:
    """Run ``python -m rl_zoo3.train`` into ``cache_dir/{algo}/{env_id}_N`` (its own, unmodified trainer).

    :raises QuarlError: when rl-zoo3 has no hyperparameters for the pair or training fails.
    """
    command = [
        sys.executable, "-m", "rl_zoo3.train", "--algo", algo, "--env", env_id, "-f", str(cache_dir),
        "--seed", str(seed), "--eval-freq", "-1", "--vec-env", "dummy", "--log-interval", "-1",
    ]  # fmt: skip
    if n_timesteps:
        command += ["-n", str(n_timesteps)]
    print(f"Training an fp32 {algo} baseline on {env_id} with rl-zoo3's hyperparameters: {' '.join(command[1:])}")
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:] or [""]
        raise QuarlError(f"training {algo} on {env_id} failed: {tail[0]}")
