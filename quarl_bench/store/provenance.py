"""What produced a row: the driver's command line, the code (git commit + dirty flag), package versions.

Captured once in the driver process (:func:`driver_provenance`) and handed to workers with their work, so a row
evaluated in a pool process or on a Ray worker still names the command the user typed, not the worker's argv.
"""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from quarl_bench.types import QUANTIZER_VERSION, AgentRef

PACKAGES = (
    "quarl-bench",
    "torch",
    "stable-baselines3",
    "sb3-contrib",
    "rl-zoo3",
    "gymnasium",
    "ale-py",
    "numpy",
    "onnxruntime",
    "ray",
    "huggingface-hub",
)
TRAINING_RECORD = "quarl_training.json"
_command: list[str] | None = None


def set_command(argv: Sequence[str]) -> None:
    """Record the command line the user typed (the CLI calls this first thing)."""
    global _command
    _command = ["quarl-bench", *argv]


def driver_provenance() -> dict[str, Any]:
    """Command, code and environment of this (driver) process: the same for every row a command writes."""
    commit, dirty = git_state()
    return {
        "command": shlex.join(_command if _command is not None else sys.argv),
        "git_commit": commit,
        "git_dirty": dirty,
        "versions": package_versions(),
        "quantizer_version": QUANTIZER_VERSION,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def agent_provenance(ref: AgentRef) -> dict[str, Any]:
    """Where the agent came from, and how quarl-bench trained it if it did (its ``quarl_training.json``)."""
    record = Path(ref.run_dir) / TRAINING_RECORD
    files: dict[str, Any] = {"vecnormalize": ref.vecnormalize} if ref.vecnormalize else {}
    files |= {"env_kwargs": ref.env_kwargs} if ref.env_kwargs else {}
    files |= {"env_packages": list(ref.env_packages)} if ref.env_packages else {}
    return files | {
        "agent_source": ref.source,
        "agent_path": ref.model_path or ref.run_dir,
        "agent_hash": ref.content_hash,
        "saved_env_id": ref.saved_env_id,
        "training": json.loads(record.read_text()) if ref.run_dir and record.is_file() else None,
    }


@cache
def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


@cache
def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the quarl-bench checkout; dirty means tracked files differ from the commit."""
    repo = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=no")
    return commit.strip(), None if status is None else bool(status.strip())
