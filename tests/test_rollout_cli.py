"""``quarl-bench rollout`` end to end: runs with their fp32 references, rows with curves, resumption, the report,
the study file, Ray, and bad input."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from quarl_bench.config import config_dir
from quarl_bench.errors import QuarlError
from quarl_bench.methods.rollout import RolloutConfig, job_for, load_rollout_grid
from quarl_bench.store import ResultStore

TINY = ("--env", "CartPole-v1", "-n", "512", "--episodes", "3", "--workers", "1")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--cap", "0"), "bad cap 0: expected a ratio cap C >= 1"),  # the config's own line
        (("--cap", "-2"), "bad cap -2: expected a ratio cap C >= 1"),
        (("--rollout-precision", "int9x"), "bad precision 'int9x'"),
        (("--correction", "clip"), "invalid choice: 'clip'"),
        (("--algo", "dqn", "--correction", "tis"), "bad algo 'dqn' for --correction tis"),
        (("-n", "0"), "bad value '0': expected a positive integer"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(cli, tmp_path: Path, flags, message) -> None:
    store = tmp_path / "r.sqlite"
    code, out, err = cli("rollout", *TINY, *flags, "--store", store)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not store.exists()


def test_runs_store_rows_with_curves_and_resume(cli, tmp_path: Path) -> None:
    store, cache = tmp_path / "r.sqlite", tmp_path / "agents"
    args = ("rollout", *TINY, "--rollout-precision", "int2", "--correction", "tis", "--seeds", "0", "1")
    code, out, _ = cli(*args, "--store", store, "--cache", cache)
    assert code == 0, out
    with ResultStore(store) as opened:
        rows = opened.to_dataframe()
    assert len(rows) == 4 and set(rows["method"]) == {"rollout"}
    assert sorted(zip(rows["precision"], rows["seed"], strict=True)) == [
        ("fp32", 0),
        ("fp32", 1),
        ("int2", 0),
        ("int2", 1),
    ]
    for _, row in rows[rows["precision"] == "int2"].iterrows():
        reference = rows[(rows["precision"] == "fp32") & (rows["seed"] == row["seed"])].iloc[0]
        assert row["reference_key"] == reference["key"]  # paired with fp32 rollouts of the same seed
        assert row["error_pct"] == pytest.approx(
            (reference["mean_reward"] - row["mean_reward"]) / abs(reference["mean_reward"]) * 100
        )
        training = row["provenance"]["training"]
        assert training["training_steps"] == 512 and training["threshold"] == 475.0
        assert row["provenance"]["evaluated_precision"] == "fp32" and row["provenance"]["rollout_precision"] == "int2"
        curve = training["curve"]
        assert [p["timesteps"] for p in curve] == [256, 512]  # rl-zoo3's 8 envs x 32 steps per update
        assert all(p["kl"] > 0 and p["share_capped"] >= 0 for p in curve)
        assert training["rollout"]["correction"] == "tis" and training["rollout"]["cap"] == 2.0
    assert "int2 tis-c2 seed 1" in out
    code, out, _ = cli(*args, "--store", store, "--cache", cache)  # everything stored: nothing trains again
    assert code == 0 and "seed 1:" not in out
    report = tmp_path / "report"
    assert cli("report", "--all-files", "--store", store, "--out", report)[0] == 0
    table = pd.read_csv(report / "rollout_final.csv")
    assert list(zip(table["rollout precision"], table["correction"], table["seeds"], strict=True)) == [
        ("fp32", "none", 2),
        ("int2", "tis-c2", 2),
    ]
    int2 = table.iloc[1]
    assert set(int2["rows"].split(", ")) == set(rows[rows["precision"] == "int2"]["key"])
    finals = rows.set_index(["precision", "seed"])["mean_reward"]
    expected = ((finals["int2", 0] - finals["fp32", 0]) + (finals["int2", 1] - finals["fp32", 1])) / 2
    assert int2["vs fp32 rollouts"] == pytest.approx(expected)
    assert list(report.glob("rollout_CartPole-v1_*.png"))


def test_study_file_pairs_every_run_with_its_reference() -> None:
    runs = load_rollout_grid(config_dir() / "rollout.yaml")
    cartpole = [r for r in runs if r.env_id == "CartPole-v1"]
    # seeds x (fp32, three float formats, int8/4/3 x three corrections, ONNX Runtime int8 naive and tis)
    assert len(cartpole) == 5 * (1 + 3 + 3 * 3 + 2)
    assert {c.label() for c in cartpole if c.backend == "onnxruntime"} == {"none-ort", "tis-c2-ort"}
    for i, run in enumerate(runs):
        assert run.reference() in runs[: i + 1]
    envs = {r.env_id for r in runs}
    assert envs == {"CartPole-v1", "Acrobot-v1", "LunarLander-v3", "Pendulum-v1", "HalfCheetahBulletEnv-v0"}
    assert {r.seed for r in runs} == {0, 1, 2, 3, 4}


def test_row_keys_separate_what_changes_the_run() -> None:
    base = RolloutConfig("ppo", "CartPole-v1", "int8", "tis")
    keys = {
        job_for(c).key
        for c in (
            base,
            RolloutConfig("ppo", "CartPole-v1", "int8", "tis", cap=3.0),
            RolloutConfig("ppo", "CartPole-v1", "int8", "mis"),
            RolloutConfig("ppo", "CartPole-v1", "int4", "tis"),
            RolloutConfig("ppo", "CartPole-v1", "int8", "tis", seed=1),
        )
    }
    assert len(keys) == 5
    assert job_for(base).reference().key == job_for(base.reference()).key
    with pytest.raises(QuarlError, match="bad cap inf"):
        RolloutConfig("ppo", "CartPole-v1", cap=float("inf"))


@pytest.mark.ray
def test_ray_executor_runs_and_the_driver_stores(cli, tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    code, out, _ = cli(
        "rollout",
        *TINY,
        "--rollout-precision",
        "int4",
        "--executor",
        "ray",
        "--store",
        store,
        "--cache",
        tmp_path / "agents",
    )
    assert code == 0, out
    with ResultStore(store) as opened:
        rows = opened.to_dataframe()
    assert sorted(rows["precision"]) == ["fp32", "int4"]
    assert all(len(p["training"]["curve"]) == 2 for p in rows["provenance"])
