"""Mixed-precision training: standard AMP (autocast forwards only) learns; both runs stored as method amp with their
per-update timings, next to QuaRL Table 5 in the report; the loss scaler's arithmetic."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from quarl_bench.store.results import load_results

pytestmark = pytest.mark.slow


def test_bf16_dqn_learns_and_is_timed_next_to_fp32(cli, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = (
        "amp",
        "--algo",
        "dqn",
        "--env",
        "CartPole",
        "-n",
        "12000",
        "--policy-arch",
        "small",
        "--episodes",
        "10",
        "--device",
        "cpu",
        "--cache",
        tmp_path / "agents",
        "--store",
        store,
    )
    code, out, err = cli(*args)
    assert code == 0, err
    assert "speed-up" in out and "bf16" in out
    frame = load_results(store)
    assert list(frame["method"]) == ["amp", "amp"] and list(frame["precision"]) == ["fp32", "fp32"]
    trainings = [row["training"] for row in frame["provenance"]]
    assert sorted(t["dtype"] for t in trainings) == ["bf16", "fp32"]
    # DQN CartPole in rl-zoo3: 128 gradient steps per train() call, every 256 env steps after 1000
    assert trainings[0]["updates"] == trainings[1]["updates"] > 0 and trainings[0]["updates"] % 128 == 0
    assert all(t["ms_per_update"] > 0 and t["net_arch"] == [64, 64] and t["device"] == "cpu" for t in trainings)
    rewards = dict(zip([t["dtype"] for t in trainings], frame["mean_reward"], strict=True))
    assert rewards["bf16"] >= REWARD_FLOOR  # a random policy scores about 22; autocast around train() scored 9.4
    assert cli("report", "--store", store, "--out", tmp_path / "report")[0] == 0
    timing = pd.read_csv(tmp_path / "report" / "amp_timing.csv").set_index("dtype")
    assert timing.loc["bf16", "speed-up"] > 0  # its arithmetic is checked on hand-made rows below
    assert timing.loc["bf16", "updates"] == trainings[0]["updates"]
    fp32_row = frame["key"][[t["dtype"] == "fp32" for t in trainings]].item()
    assert timing.loc["bf16", "fp32 row"] == fp32_row  # named by the bf16 run's record, not matched by settings
    assert timing.loc["bf16", "paper policy"] == "Policy A" and timing.loc["bf16", "paper speed-up"] == 0.87
    from quarl_bench.deploy.machine import half_features

    here = " ".join(half_features()) or "none"  # whether this CPU does bf16 arithmetic decides the speed-up
    assert set(timing["bf16/fp16 units"]) == {here} and trainings[0]["cpu"]


REWARD_FLOOR = 100


def amp_row(key: str, dtype: str, ms: float, agent: str, fp32_agent: str | None = None) -> dict:
    training = {
        "algo": "dqn",
        "env_id": "CartPole-v1",
        "arch": "small",
        "n_timesteps": 5000,
        "seed": 0,
        "device": "cuda",
        "dtype": dtype,
        "ms_per_update": ms,
        "updates": 2176,
    }
    if fp32_agent is not None:
        training["fp32_agent_hash"] = fp32_agent
    return {
        "method": "amp",
        "key": key,
        "mean_reward": 100.0,
        "agent_hash": agent,
        "provenance": {"training": training},
    }


def test_amp_speed_up_uses_the_named_fp32_run_and_never_guesses() -> None:
    from quarl_bench.report.tables import amp_table

    # the same configuration trained in fp32 on two machines (2.0 and 4.0 ms per update)
    rows = [amp_row("a", "fp32", 2.0, "h-a"), amp_row("b", "fp32", 4.0, "h-b"), amp_row("c", "fp16", 8.0, "h-c", "h-b")]
    table = amp_table(pd.DataFrame(rows)).set_index("row")
    assert table.loc["c", "speed-up"] == 0.5 and table.loc["c", "fp32 row"] == "b"
    old_record = amp_row("d", "fp16", 8.0, "h-d")  # written before records named their fp32 run: two candidates
    table = amp_table(pd.DataFrame(rows[:2] + [old_record])).set_index("row")
    assert pd.isna(table.loc["d", "speed-up"]) and pd.isna(table.loc["d", "fp32 row"])
    table = amp_table(pd.DataFrame([rows[0], old_record])).set_index("row")  # one candidate: that one
    assert table.loc["d", "speed-up"] == 0.25


def test_amp_rows_name_the_cpu_s_bf16_units_or_say_they_were_not_recorded() -> None:
    from quarl_bench.report.tables import amp_table

    with_units, without, old = (
        amp_row("a", "fp32", 2.0, "h-a"),
        amp_row("b", "bf16", 1.0, "h-b", "h-a"),
        amp_row("c", "bf16", 1.0, "h-c", "h-a"),
    )
    with_units["provenance"]["training"]["half_features"] = ["avx512_bf16", "amx_bf16"]
    without["provenance"]["training"]["half_features"] = []
    table = amp_table(pd.DataFrame([with_units, without, old])).set_index("row")["bf16/fp16 units"]
    assert table.to_dict() == {"a": "avx512_bf16 amx_bf16", "b": "none", "c": "not recorded"}


def test_loss_scale_halves_on_overflow_and_grows_after_a_clean_run() -> None:
    from quarl_bench.training.amp_hooks import LossScale

    scale = LossScale(growth_interval=3)
    scale.update(found_inf=True)
    assert (scale.value, scale.skipped_steps) == (2.0**15, 1)
    for _ in range(3):
        scale.update(found_inf=False)
    assert scale.value == 2.0**16


def test_mixed_precision_forwards_run_in_bf16_and_gradients_stay_fp32() -> None:
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN

    from quarl_bench.training.amp_hooks import enable_mixed_precision, networks

    model = DQN("MlpPolicy", gym.make("CartPole-v1"), policy_kwargs={"net_arch": [16]}, device="cpu")
    assert [type(m).__name__ for m in networks(model.policy)] == ["QNetwork", "QNetwork"]  # q_net, q_net_target
    seen = []
    linear = model.q_net.q_net[0]
    linear.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    enable_mixed_precision(model, "bf16")
    q_values = model.q_net(torch.ones(4, 4))
    assert seen == [torch.bfloat16] and q_values.dtype == torch.float32  # loss is computed in fp32
    q_values.sum().backward()
    assert linear.weight.grad.dtype == torch.float32 and linear.weight.dtype == torch.float32  # fp32 master weights
