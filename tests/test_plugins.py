"""Plugins from outside the package: ``examples/quarl-lab-plugin`` installed into a fresh environment beside this
quarl-bench adds a number format, a data-free rounding, a method and a backend through the ``quarl_bench.plugins``
entry point, and ``run``, ``certify``, ``sweep``, ``report`` and ``export`` use them, quarl-bench's files unchanged.
A name registered twice is refused in one line naming both sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest

from quarl_bench.errors import QuarlError
from quarl_bench.registry import Registry
from quarl_bench.store import ResultStore

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "quarl-lab-plugin"


@pytest.fixture(scope="module")
def lab_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment that sees this quarl-bench (and its dependencies) and has the example plugin
    installed into it with pip, as a lab would; returns its Python."""
    venv = tmp_path_factory.mktemp("lab") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # beside quarl-bench: this environment's packages (an editable quarl-bench included) are a site dir of the new one
    Path(site, "quarl_bench_beside.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
    )
    install = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", EXAMPLE]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    assert Path(site, "quarl_lab").is_dir()  # installed into the new environment, not this one
    return python


def lab(python: Path, folder: Path, *args: object) -> subprocess.CompletedProcess:
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    command = [python, "-m", "quarl_bench.cli", *map(str, args)]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env, timeout=600)


def tracked_state() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "quarl_bench"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout


GRIDS = {
    "noise.yaml": "name: lab_noise\nmethod: weight-noise\nepisodes: 5\nseeds: [0]\n"
    "grid:\n  - {algos: [dqn], envs: [CartPole-v1], precisions: [8, 4]}\n",
    "formats.yaml": "name: lab_formats\nepisodes: 5\nseeds: [0]\ngrid:\n"
    "  - {algos: [dqn], envs: [CartPole-v1], precisions: [nf4, 8]}\n"
    "  - {algos: [dqn], envs: [CartPole-v1], precisions: [4], ptq: stochastic}\n",
}


@pytest.mark.slow
def test_an_installed_plugin_adds_a_format_a_rounding_a_method_and_a_backend(
    lab_python: Path, zoo: Path, tmp_path: Path
) -> None:
    before = tracked_state()
    store, agent = tmp_path / "lab.sqlite", ("--algo", "dqn", "--env", "CartPole-v1", "-f", zoo)
    help_text = lab(lab_python, tmp_path, "run", "--help").stdout
    assert "nf4" in help_text and "stochastic (stochastic rounding)" in help_text
    ran = lab(lab_python, tmp_path, "run", *agent, "--bits", "nf4", "-n", "5", "--store", store)
    assert ran.returncode == 0, ran.stderr
    rounded = lab(
        lab_python, tmp_path, "run", *agent, "--bits", "4", "--ptq", "stochastic", "-n", "5", "--store", store
    )
    assert rounded.returncode == 0, rounded.stderr
    assert "int4 stochastic" in rounded.stdout and "cal" not in rounded.stdout  # data-free: no calibration states
    certified = lab(
        lab_python, tmp_path, "certify", *agent, "--bits", "8", "--method", "weight-noise", "--store", store
    )
    assert certified.returncode == 0, certified.stderr
    for grid, text in GRIDS.items():
        (tmp_path / grid).write_text(text)
        swept = lab(lab_python, tmp_path, "sweep", grid, "-f", zoo, "--workers", "1", "--store", store)
        assert swept.returncode == 0, swept.stderr
    exported = lab(lab_python, tmp_path, "export", *agent, "--backend", "ort-fp32-folded", "--out", "folded")
    assert exported.returncode == 0, exported.stderr
    contract = json.loads((tmp_path / "folded" / "policy.json").read_text())
    assert contract["backend"] == "ort-fp32-folded"
    reported = lab(lab_python, tmp_path, "report", "--store", store, "--out", "report")
    assert reported.returncode == 0, reported.stderr

    rows = pd.read_csv(tmp_path / "report" / "reward_statistics.csv")
    assert {"nf4"} <= set(rows["precision"])
    lines = pd.read_csv(tmp_path / "report" / "certified_verdicts.csv")
    assert list(lines["method"]) == ["weight-noise"]
    other = pd.read_csv(tmp_path / "report" / "other_methods.csv")
    assert set(other["method"]) == {"weight-noise"} and {"int8", "int4"} <= set(other["precision"])
    with ResultStore(store) as opened:
        frame = opened.to_dataframe()
    stochastic = frame[[fields.get("ptq") == "stochastic" for fields in frame["spec_json"]]]
    # one row: the grid's int4 stochastic cell is the job `run` stored (5 episodes, seed 0), found, not played again
    assert len(stochastic) == 1 and all(not f.get("calibration_states") for f in stochastic["spec_json"])
    nf4 = frame[frame["precision"] == "nf4"]["weights"].iloc[0]["acting_bytes"]
    int4 = stochastic["weights"].iloc[0]["acting_bytes"]
    assert int4 < nf4 < 1.2 * int4  # nf4's registered scale bits (one fp32 per 64 weights) are counted
    assert tracked_state() == before  # quarl-bench's own files unchanged


def test_a_name_registered_twice_is_refused_naming_both_sources() -> None:
    registry: Registry[str] = Registry("backend")
    registry.add("c-int8", "built in", source="quarl_bench.deploy.targets.c")
    registry.add("c-int8", "reloaded", source="quarl_bench.deploy.targets.c")  # the same module again: a reload
    with pytest.raises(QuarlError) as refused:
        registry.add("c-int8", "a lab's", source="mylab.backends")
    assert str(refused.value) == (
        "backend 'c-int8' registered twice: by quarl_bench.deploy.targets.c and by mylab.backends; rename one of them"
    )
    assert registry.get("c-int8") == "reloaded"


def test_a_plugin_that_registers_a_built_in_name_is_one_line(tmp_path: Path) -> None:
    """A lab package registering ``fp16`` again, found through its entry point by a fresh interpreter."""
    package, info = tmp_path / "clash_lab", tmp_path / "clash_lab-0.1.dist-info"
    package.mkdir()
    info.mkdir()
    (package / "__init__.py").write_text(
        "from quarl_bench.precision import Precision, register\n"
        "register(Precision('fp16', 'float', 16, 0.0, 'quarl_bench.quant.affine:cast_round_trip_named'))\n"
    )
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-lab\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[quarl_bench.plugins]\nclash = clash_lab\n")
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "quarl_bench.cli", "run", "--env", "CartPole-v1", "--bits", "nf9"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "quarl-bench: error: plugin 'clash' (clash_lab, from clash-lab): precision 'fp16' registered twice: by "
        "quarl_bench.precision and by clash_lab; rename one of them"
    )
