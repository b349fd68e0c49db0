"""Benchmarks that run: every script in benchmarks/ imports and parses its flags (so a renamed or broken import
fails here, not in a reader's hands), and the scripts with a quick mode run it and print their headline."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import quarl_bench

ROOT = Path(__file__).resolve().parents[1]
# the scripts (zoo_mlp.py is the helpers they share)
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if '__name__ == "__main__"' in p.read_text())
# script -> the start of its headline (its last line) in --quick mode
QUICK = {
    "actor_inference.py": "int8 (onnxruntime MatMulInteger)",
    "actorq_speedup.py": "int8 vs fp32: actor steps/s",
    "c_int8_instructions.py": "c-int8 DSP path: ",
    "c_int8_recorded.py": "c-int8 on recorded states: gate passed 1 of 1",
    "c_int8_zoo.py": "certified equivalent to their fake-quant: ",
    "calibration_cost.py": "calibration: ",
    "certify_heldout.py": "held-out, asymptotic: ",
    "certify_speed.py": "ratio fixed / certify: ",
    "certify_validity.py": "worst P(false safe), asymptotic",
    "denoising_steps.py": "final chunk error vs fp32: int8 ",
    "chunk_latency.py": "int8/fp32 latency per executed action: act ",
    "deploy_latency.py": "policy III: int8 ",
    "eval_throughput.py": "eval vs env-only: ",
    "harden_cost.py": "dqn:CartPole-v1",
    "ort_int8_format.py": "portable uint8 weights: ",
    "report_speed.py": "report --html: ",
    "rollout_speed.py": "int8 rollouts: ",
    "sweep_speed.py": "speed-up: ",
    "trial_counts.py": "trial counts against STEP: ",
}
NEEDS_QEMU = ("c_int8_instructions.py", "c_int8_recorded.py")
STARTS_RAY = ("actorq_speedup.py",)  # its actors are Ray's: one Ray test at a time (conftest's lock)


def test_every_script_has_a_quick_mode() -> None:
    assert set(QUICK) == set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_imports_and_parses_its_flags(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(ROOT / "benchmarks" / script), run_name="__main__")
    assert done.value.code == 0


@pytest.mark.parametrize(
    "script", [pytest.param(s, marks=[pytest.mark.ray] if s in STARTS_RAY else []) for s in sorted(QUICK)]
)
def test_quick_benchmarks_run_and_print_their_headline(script: str, zoo: Path) -> None:
    if script in NEEDS_QEMU and shutil.which("qemu-system-arm") is None:
        pytest.skip("needs qemu-system-arm and gcc-arm-none-eabi (scripts/bootstrap.sh installs them as root)")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "QUARL_ZOO": str(zoo), "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(QUICK[script]), done.stdout[-2000:]


def test_no_public_name_is_also_a_submodule() -> None:
    """``from quarl_bench import action_mode`` returned the submodule once it had been imported, not the function."""
    package = Path(quarl_bench.__file__).parent
    submodules = {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir() if p.is_dir()}
    assert not set(quarl_bench.__all__) & submodules


def test_the_public_api_is_what_users_call_and_every_name_resolves() -> None:
    """The package exports the calls of the commands, what they take and what they leave (about SB3's and
    lm-eval's size); building blocks are imported from their modules, as the benchmarks do."""
    assert 15 <= len(quarl_bench.__all__) <= 20
    assert {"resolve", "as_policy", "evaluate_agent", "certify_agent", "ResultStore", "QuarlError"} <= set(
        quarl_bench.__all__
    )
    for name in quarl_bench.__all__:
        assert getattr(quarl_bench, name).__name__ == name
