"""Shared fixtures: the pretrained zoo (``$QUARL_ZOO``, default ``../shared/zoo``) and a CLI runner."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from quarl_bench.cli import main

REPO = Path(__file__).resolve().parents[1]
ZOO = Path(os.environ.get("QUARL_ZOO", REPO.parent / "shared" / "zoo")).resolve()


@pytest.fixture(scope="session")
def zoo() -> Path:
    if not (ZOO / "ppo").is_dir():
        pytest.fail(f"pretrained zoo not found at {ZOO}: set QUARL_ZOO")
    return ZOO


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``quarl-bench ARGS`` in-process; returns (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run
