"""MuJoCo: the zoo's -v3 agents (saved with mujoco-py) run on the -v4 envs of the mujoco bindings through the CLI,
TQC included, and an agent whose observation layout changed between v3 and v4 fails in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from quarl_bench.store.results import load_results

pytestmark = pytest.mark.slow


def test_sac_halfcheetah_v3_agent_runs_on_v4_at_fp32_and_int8(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    code, out, err = cli(
        "run",
        "--algo",
        "sac",
        "--env",
        "HalfCheetah-v3",
        "--bits",
        "32",
        "8",
        "--granularity",
        "per-channel",
        "-n",
        "3",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert code == 0, err
    assert "saved for HalfCheetah-v3; it runs on HalfCheetah-v4" in " ".join(out.split())
    rewards = load_results(store).set_index("precision")["mean_reward"]
    assert rewards["fp32"] >= 9000  # measured here: 9300 over these 3 episodes
    assert rewards["int8"] >= 8500  # per-channel int8 (per-tensor int8 loses about half of it: 4713)


def test_tqc_is_an_algorithm(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    code, _, err = cli(
        "run",
        "--algo",
        "tqc",
        "--env",
        "mujoco/HalfCheetah",
        "--bits",
        "32",
        "fp16",
        "-n",
        "2",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert code == 0, err
    rows = load_results(store).set_index("precision")
    assert rows.loc["fp32", "algo"] == "tqc" and rows.loc["fp32", "mean_reward"] >= 11500  # measured here: 12090
    assert rows.loc["fp16", "action_rel_error"] < 0.01


def test_v3_agent_whose_observations_changed_fails_in_one_line(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    code, _, err = cli("run", "--algo", "a2c", "--env", "Ant-v3", "--bits", "8", "--folder", zoo, "--store", store)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "a2c/Ant-v3 cannot run on Ant-v4" in err and "contact forces" in err
    assert not store.exists()
