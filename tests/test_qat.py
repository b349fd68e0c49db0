"""QAT: the fake-quant forward equals PTQ of the same weights, gradients flow, the delay switches on time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3 import DQN, PPO

from quarl_bench.quant.qat import QATSwitch, QuantDelayCallback, prepare_qat
from quarl_bench.quant.quantize import quantize
from quarl_bench.store.results import load_results
from quarl_bench.types import QuantSpec


def test_fake_quant_forward_equals_ptq_of_the_same_weights() -> None:
    model = PPO("MlpPolicy", "CartPole-v1", device="cpu", seed=0)
    ptq_policy, _ = quantize(model.policy, QuantSpec(4))
    switch = QATSwitch(QuantSpec(4), enabled=True)
    assert prepare_qat(model.policy, switch) == [
        "mlp_extractor.policy_net.0",
        "mlp_extractor.policy_net.2",
        "action_net",
    ]
    obs = torch.randn(32, 4)
    with torch.no_grad():
        qat_logits = model.policy.get_distribution(obs).distribution.logits
        ptq_logits = ptq_policy.get_distribution(obs).distribution.logits
    torch.testing.assert_close(qat_logits, ptq_logits)
    switch.enabled = False
    with torch.no_grad():
        assert not torch.allclose(model.policy.get_distribution(obs).distribution.logits, ptq_logits)


def test_gradients_flow_through_the_straight_through_estimator() -> None:
    model = PPO("MlpPolicy", "CartPole-v1", device="cpu", seed=0)
    prepare_qat(model.policy, QATSwitch(QuantSpec(2), enabled=True))
    logits = model.policy.get_distribution(torch.randn(16, 4)).distribution.logits
    logits.pow(2).sum().backward()
    for layer in (model.policy.mlp_extractor.policy_net[0], model.policy.action_net):
        assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0


def test_state_dict_and_target_network_updates_are_unchanged() -> None:
    model = DQN("MlpPolicy", "CartPole-v1", buffer_size=100, device="cpu")
    keys = list(model.policy.state_dict())
    prepare_qat(model.policy, QATSwitch(QuantSpec(8), enabled=True))
    assert list(model.policy.state_dict()) == keys
    model.q_net_target.load_state_dict(model.q_net.state_dict())  # what DQN's target update relies on


def test_quant_delay_switches_at_the_right_step() -> None:
    switch = QATSwitch(QuantSpec(6))
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, n_epochs=1, device="cpu", seed=0)
    prepare_qat(model.policy, switch)
    model.learn(256, callback=QuantDelayCallback(switch, quant_delay=100))
    assert switch.enabled and switch.enabled_at_step == 100


@pytest.mark.slow
def test_short_qat_run_through_the_cli_stores_a_qat_row(cli, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = (
        "qat",
        "--algo",
        "ppo",
        "--env",
        "CartPole",
        "--bits",
        "6",
        "-n",
        "2048",
        "--quant-delay",
        "1024",
        "--episodes",
        "5",
        "--cache",
        tmp_path / "agents",
        "--store",
        store,
    )
    code, out, err = cli(*args)
    assert code == 0, err
    frame = load_results(store).set_index("precision")
    qat = frame.loc["int6"]
    assert qat["method"] == "qat" and len(qat["episode_rewards"]) == 5
    assert frame.loc["fp32", "method"] == "qat"  # the QAT agent's own unquantized weights, apart from PTQ rows
    assert qat["fp32_reward"] == frame.loc["fp32", "mean_reward"] and not np.isnan(qat["E %"])
    training = qat["provenance"]["training"]
    assert training["training_steps"] == 2048 and training["quant_delay"] == 1024
    assert 1024 <= training["enabled_at_step"] < 1024 + 8  # switched on within one vectorized step (8 envs)
    run_dir = Path(qat["agent_path"])
    assert (run_dir / "CartPole-v1.zip").is_file() and (run_dir / "CartPole-v1" / "config.yml").is_file()
    created = sorted(load_results(store)["created_at"])
    assert cli(*args)[0] == 0  # reuses the trained agent and the stored rows
    assert sorted(load_results(store)["created_at"]) == created
