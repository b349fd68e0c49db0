"""Mixed-precision training timing: both runs stored as method amp, with their per-update timings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from quarl_bench.store import load_results

pytestmark = pytest.mark.slow


def test_amp_command_times_fp32_and_bf16(cli, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = ("amp", "--algo", "dqn", "--env", "CartPole", "-n", "1600", "--policy-arch", "small", "--episodes", "2",
            "--cache", tmp_path / "agents", "--store", store)  # fmt: skip
    code, out, err = cli(*args)
    assert code == 0, err
    assert "speed-up" in out and "bf16" in out
    frame = load_results(store)
    assert list(frame["method"]) == ["amp", "amp"] and list(frame["precision"]) == ["fp32", "fp32"]
    trainings = [row["training"] for row in frame["provenance"]]
    assert sorted(t["dtype"] for t in trainings) == ["bf16", "fp32"]
    # DQN CartPole in rl-zoo3: 128 gradient steps per train() call, every 256 env steps after 1000
    assert trainings[0]["updates"] == trainings[1]["updates"] > 0 and trainings[0]["updates"] % 128 == 0
    assert all(t["ms_per_update"] > 0 and t["net_arch"] == [64, 64] for t in trainings)
    assert cli("report", "--store", store, "--out", tmp_path / "report")[0] == 0
    timing = pd.read_csv(tmp_path / "report" / "amp_timing.csv").set_index("dtype")
    ms = {t["dtype"]: t["ms_per_update"] for t in trainings}
    assert timing.loc["bf16", "speed-up"] == pytest.approx(ms["fp32"] / ms["bf16"])  # from the two stored runs
    assert timing.loc["bf16", "updates"] == trainings[0]["updates"]
