"""ORT int8 artifacts that compute the same actions on every CPU: uint8 weights on the claim's grid (no x86 kernel
saturates them), the gate recorded with the machine it was measured on, and a check that travels with the folder.

This machine may have VNNI (exact int8 products) or only AVX2 (ORT's u8 x s8 kernel saturates int16 pair sums): the
AVX2 path is tested everywhere through ``deploy/int8_emulation.py``, which replays a graph's integer products as each
kernel computes them, and the one expectation that depends on the CPU present says so in its name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

from quarl_bench.deploy.int8_emulation import emulated
from quarl_bench.deploy.machine import cpu_kind, int8_features
from quarl_bench.deploy.ort_int8 import kernels, ort_int8, weight_types


@pytest.fixture(scope="module")
def lander(zoo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dqn LunarLander's ort-int8-static artifact, exported once through the CLI (it flipped 73.9% of its actions
    against its claim on an AVX2 machine when its weights were 7-bit under an int8 label, 49% on a VNNI one when
    ORT rounded its Q-values to uint8)."""
    from quarl_bench.cli import main

    folder = tmp_path_factory.mktemp("lander")
    args = ["export", "--algo", "dqn", "--env", "LunarLander-v3", "--folder", str(zoo), "--backend", "ort-int8-static"]
    args += ["--out", str(folder / "static"), "--store", str(folder / "q.sqlite"), "--max-episodes", "20"]
    assert main(args) == 0
    return folder / "static"


def test_lander_static_artifact_matches_its_claim_and_states_its_widths(lander: Path) -> None:
    document = json.loads((lander / "policy.json").read_text())
    assert document["parity"]["passed"] and document["parity"]["flip_rate_outside_near_ties"] <= 0.02
    assert "uint8 codes with zero point 128" in document["quantization"]["weights"]
    assert document["quantization"]["decision_values"].startswith("fp32")
    check = document["check"]
    assert check["weights"] == {"FLOAT": 1, "UINT8": 2}  # the first layer fp32, the other two uint8
    assert check["ort_ops"] == {"Gemm": 1, "QGemm": 2}  # integer kernels for both, here
    assert check["machine"]["int8_features"] == list(int8_features()) and check["runtime"]["onnxruntime"]
    assert "u8 x u8" in check["kernel"] and "exact" in check["kernel"]


def test_lander_check_passes_here_and_under_the_avx2_kernel(cli, lander: Path) -> None:
    done = subprocess.run([sys.executable, "check.py"], cwd=lander, capture_output=True, text=True)
    assert done.returncode == 0 and "passed" in done.stdout and "identical" in done.stdout, done.stdout
    code, out, _ = cli("verify", lander)
    assert code == 0 and "passed" in out
    code, out, _ = cli("verify", lander, "--emulate", "avx2")
    assert code == 0 and "on 0 of 256 vectors" in out, out


def test_check_names_the_machine_feature_when_outputs_moved(lander: Path, tmp_path: Path) -> None:
    """An artifact whose recorded outputs differ from this machine's, recorded on another CPU kind (AVX2-only where
    this one has more, AVX-512 VNNI where this one is AVX2-only): the check still judges the gate, and names both
    feature sets."""
    from quarl_bench.deploy.machine import int8_features

    other = ["avx2"] if list(int8_features()) != ["avx2"] else ["avx2", "avx512bw", "avx512_vnni"]
    moved = tmp_path / "moved"
    moved.mkdir()
    for path in lander.iterdir():
        (moved / path.name).write_bytes(path.read_bytes())
    document = json.loads((moved / "policy.json").read_text())
    document["check"]["machine"]["int8_features"] = other
    (moved / "policy.json").write_text(json.dumps(document))
    data = dict(np.load(moved / "vectors.npz"))
    data["outputs"] = data["outputs"].copy()
    data["outputs"][0] += 1
    np.savez(moved / "vectors.npz", **data)
    done = subprocess.run([sys.executable, "check.py"], cwd=moved, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert "differ from those recorded at export on 1 of 256" in done.stdout
    assert f"at export {' '.join(other)}" in done.stdout and "int8 features here" in done.stdout


def test_verify_refuses_a_folder_without_a_check(cli, tmp_path: Path) -> None:
    code, _, err = cli("verify", tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not a checkable artifact folder" in err


def wide_policy() -> bytes:
    """A 64-64-64-4 MLP whose weights are large beside each other, as trained policies' are in places: the
    inputs where an int16 pair sum of u8 x s8 products overflows."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    with torch.no_grad():
        for layer in (net[0], net[2]):
            layer.weight.copy_(layer.weight.abs() * torch.sign(torch.randn(layer.weight.shape[0], 1)))
    path = Path(__import__("tempfile").mkdtemp()) / "wide.onnx"
    torch.onnx.export(net, torch.rand(1, 16), path, input_names=["obs"], dynamo=False, dynamic_axes={"obs": {0: "b"}})
    return path.read_bytes()


def ort_outputs(model: bytes, observations: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"obs": observations[i : i + 1]})[0] for i in range(len(observations))])


@pytest.mark.parametrize("backend", ["ort-int8-dynamic", "ort-int8-static"])
def test_uint8_weights_compute_the_same_on_the_avx2_kernel_and_int8_ones_do_not(backend: str) -> None:
    fp32 = wide_policy()
    observations = np.random.default_rng(1).uniform(0, 4, (200, 16)).astype(np.float32)
    portable = ort_int8(backend, fp32, observations, "minmax")
    signed = ort_int8(backend, fp32, observations, "minmax", signed=True)
    assert "INT8" not in weight_types(portable) and "INT8" in weight_types(signed)
    exact, avx2 = emulated(portable, observations, "exact"), emulated(portable, observations, "avx2")
    assert np.array_equal(exact, avx2)  # widened to int16 and added in int32: nothing saturates
    saturated = np.abs(emulated(signed, observations, "exact") - emulated(signed, observations, "avx2")).max(axis=1)
    assert (saturated > 1e-3).mean() > 0.5  # the format ORT picks by default moves on AVX2
    # the emulation's exact kernel is what ORT computes here (static: within one requantization step)
    scale = np.abs(exact).max()
    assert np.abs(ort_outputs(portable, observations) - exact).max() <= (1e-5 if "dynamic" in backend else 0.02) * scale


def test_signed_weights_on_the_cpu_present_follow_its_kernel() -> None:
    """The CPU-dependent expectation: ORT's default int8 weights give the exact products on a VNNI (or ARM) CPU, and
    on an AVX2-only CPU (or AVX-512 without VNNI) saturated ones: far from exact (26% of the output scale here), and
    what the emulated AVX2 kernel computes (bit for bit under ``scripts/avx2_emulated.sh``: ORT 1.32, EPYC Rome)."""
    fp32 = wide_policy()
    observations = np.random.default_rng(1).uniform(0, 4, (100, 16)).astype(np.float32)
    signed = ort_int8("ort-int8-dynamic", fp32, None, "minmax", signed=True)
    found = ort_outputs(signed, observations)
    exact, avx2 = emulated(signed, observations, "exact"), emulated(signed, observations, "avx2")
    scale = np.abs(exact).max()
    if cpu_kind() in ("x86-avx2", "x86-avx512"):
        assert np.abs(found - exact).max() > 1e-3 * scale, cpu_kind()  # int16 pair sums saturated here
        assert np.abs(found - avx2).max() <= 1e-6 * scale, cpu_kind()
    else:
        assert np.abs(found - exact).max() <= 1e-4 * scale, cpu_kind()
    assert kernels(signed).get("DynamicQuantizeMatMul", 0) + kernels(signed).get("MatMulIntegerToFloat", 0) >= 1


def test_a_dynamic_artifact_passes_its_check_here_and_under_the_avx2_kernel(cli, zoo: Path, tmp_path: Path) -> None:
    out = tmp_path / "dynamic"
    agent = ("--algo", "ppo", "--env", "CartPole-v1", "--folder", zoo, "--backend", "ort-int8-dynamic")
    code, _, err = cli("export", *agent, "--tolerance-abs", "100", "--out", out, "--store", tmp_path / "q.sqlite")
    assert code == 0, err
    check = json.loads((out / "policy.json").read_text())["check"]
    assert check["weights"] == {"UINT8": 3} and "DynamicQuantizeMatMul" in check["ort_ops"]
    for extra in ((), ("--emulate", "avx2")):
        code, text, _ = cli("verify", out, *extra)
        assert code == 0 and "passed" in text, text
