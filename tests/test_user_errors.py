"""What a user meets at the console script, outside any checkout detail: ``--version``, and mistakes that end in
one line and exit 2 (never a traceback), and artifact folders that follow the user's umask."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "quarl-bench"
POLICY = Path(__file__).parent / "data" / "tiny_policy.py"


def console(*args: str, cwd: Path, umask: int | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"QUARL_ZOO": str(cwd / "no-zoo")}
    before = os.umask(umask) if umask is not None else None
    try:
        return subprocess.run(
            [str(SCRIPT), *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300, check=False
        )
    finally:
        if before is not None:
            os.umask(before)


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason="needs the installed console script")


def test_version_is_printed_by_the_console_script_and_python_m(tmp_path: Path) -> None:
    done = console("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("quarl-bench ")
    module = subprocess.run([sys.executable, "-m", "quarl_bench", "--version"], capture_output=True, text=True)
    assert module.returncode == 0 and module.stdout == done.stdout


def test_mistakes_end_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "scripted.py").write_text(
        "import torch\n\ndef make():\n    return torch.jit.script(torch.nn.Sequential(torch.nn.Linear(4, 2)))\n"
    )
    store = ("--store", str(tmp_path / "q.sqlite"))
    err = one_line(console("run", "--policy-module", "scripted.py:make", "--env", "CartPole-v1", *store, cwd=tmp_path))
    assert "returned a TorchScript module" in err and "expected the torch.nn.Module itself" in err
    err = one_line(console("harden", "--grid", "harden", "--algo", "a2c", "--env", "Pendulum-v1", *store, cwd=tmp_path))
    assert "no agent x recipe of the harden study matches the filters" in err and "dqn/CartPole-v1" in err
    # values are checked before any agent loads: the recipe and the confidence, not the missing module, are named
    target = ("--bits", "4", "--policy-module", "missing.py:make", "--env", "CartPole-v1", *store)
    err = one_line(console("harden", *target, "--recipe", "nosuch", cwd=tmp_path))
    assert "nosuch" in err and "missing.py" not in err
    err = one_line(console("harden", *target, "--confidence", "1.5", cwd=tmp_path))
    assert "bad confidence '1.5'" in err


def test_an_artifact_folder_follows_the_umask(tmp_path: Path) -> None:
    shutil.copy(POLICY, tmp_path / "tiny_policy.py")
    agent = ("--policy-module", "tiny_policy.py:make", "--env", "CartPole-v1", "--store", str(tmp_path / "q.sqlite"))
    done = console(
        "export", *agent, "--backend", "ort-fp32", "--out", "art", "--max-episodes", "20", cwd=tmp_path, umask=0o022
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "art").stat().st_mode) == 0o755
