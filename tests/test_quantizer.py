"""The quantizer: exact grids, identity, float casts, granularity, idempotence, STE, acting layers only."""

from __future__ import annotations

import pytest
import torch
from stable_baselines3 import DQN, PPO, SAC

from quarl_bench.quant.affine import fake_quant
from quarl_bench.quant.ptq import acting_layers, histogram_kl, quantize, quantize_tensor, weight_profile
from quarl_bench.types import QuantSpec


def test_2bit_grid_is_quarl_grid() -> None:
    # range = |-1| + |1| = 2, step = 2 / 2**2 = 0.5
    w = torch.tensor([-1.0, -0.3, 0.0, 0.2, 0.6, 1.0])
    assert fake_quant(w, 2).tolist() == [-1.0, -0.5, 0.0, 0.0, 0.5, 1.0]


def test_4bit_grid() -> None:
    # range = 0.8 + 0.8 = 1.6, step = 0.1
    w = torch.tensor([-0.8, -0.12, 0.04, 0.33, 0.8])
    assert torch.allclose(fake_quant(w, 4), torch.tensor([-0.8, -0.1, 0.0, 0.3, 0.8]), atol=1e-7)


def test_8bit_grid() -> None:
    # range = 2, step = 2 / 256 = 2**-7; all values below are exact binary fractions
    w = torch.tensor([-1.0, 1.0, 0.5, 0.01328125, -0.00390625])
    q = fake_quant(w, 8)
    assert q.tolist() == [-1.0, 1.0, 0.5, 2 * 2**-7, 0.0]  # 1.7 steps -> 2; -0.5 steps -> 0 (half to even)


def test_8bit_error_bounded_by_half_step_and_at_most_257_levels() -> None:
    w = torch.randn(64, 64)
    step = (w.min().abs() + w.max().abs()) / 256
    q = fake_quant(w, 8)
    assert (q - w).abs().max() <= step / 2 + 1e-7
    assert len(torch.unique(q)) <= 257


def test_symmetric_grid_has_2_pow_bits_minus_one_levels() -> None:
    w = torch.linspace(-3.0, 1.0, 1000)
    q = fake_quant(w, 3, symmetric=True)  # step = 3 / 3 = 1 -> levels -3..3, data reaches -3..1
    assert sorted(torch.unique(q).tolist()) == [-3.0, -2.0, -1.0, 0.0, 1.0]
    assert len(torch.unique(fake_quant(torch.randn(10_000), 4, symmetric=True))) <= 2**4 - 1


def test_32_bits_is_identity() -> None:
    spec = QuantSpec(32)
    assert spec.precision == "fp32" and spec.is_identity
    w = torch.randn(16, 16)
    assert torch.equal(quantize_tensor(w, spec, is_conv=False), w)


def test_fp16_and_bf16_round_trip() -> None:
    w = torch.tensor([0.1, 1.0, 65504.0, 1e-8])
    assert quantize_tensor(w, QuantSpec("fp16"), False).tolist() == [0.0999755859375, 1.0, 65504.0, 0.0]
    assert quantize_tensor(w, QuantSpec("bf16"), False)[0].item() == 0.10009765625
    assert quantize_tensor(w, QuantSpec("fp16"), False).dtype == torch.float32


def test_per_channel_uses_each_output_channels_range() -> None:
    w = torch.zeros(2, 1, 1, 4)
    w[0, 0, 0] = torch.tensor([-0.01, 0.004, 0.006, 0.01])  # small channel: step 0.02 / 4 = 0.005
    w[1, 0, 0] = torch.tensor([-1.0, 0.3, 0.6, 1.0])  # large channel: step 0.5
    per_channel = fake_quant(w, 2, per_channel=True)
    per_tensor = fake_quant(w, 2, per_channel=False)  # step 0.5 for both
    assert torch.allclose(per_channel[0, 0, 0], torch.tensor([-0.01, 0.005, 0.005, 0.01]))
    assert per_channel[1, 0, 0].tolist() == [-1.0, 0.5, 0.5, 1.0]
    assert per_tensor[0].abs().sum() == 0  # the small channel collapses to zero


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("symmetric", [False, True])
def test_quantizing_twice_changes_nothing(bits: int, per_channel: bool, symmetric: bool) -> None:
    torch.manual_seed(bits)
    w = torch.randn(8, 3, 3, 3)
    once = fake_quant(w, bits, per_channel, symmetric)
    twice = fake_quant(once, bits, per_channel, symmetric)
    torch.testing.assert_close(twice, once, rtol=0, atol=1e-6)


def test_straight_through_gradient() -> None:
    w = torch.randn(5, 5, requires_grad=True)
    (fake_quant(w, 2) * 3.0).sum().backward()
    assert torch.equal(w.grad, torch.full((5, 5), 3.0))


def test_zero_tensor_is_left_alone() -> None:
    assert torch.equal(fake_quant(torch.zeros(3, 3), 4), torch.zeros(3, 3))


def test_histogram_kl() -> None:
    w = torch.randn(1000)
    assert histogram_kl(w, w) == pytest.approx(0.0, abs=1e-6)
    assert histogram_kl(w, fake_quant(w, 2)) > histogram_kl(w, fake_quant(w, 8)) > 0


def test_ppo_quantizes_actor_only_on_a_copy() -> None:
    policy = PPO("MlpPolicy", "CartPole-v1", device="cpu").policy
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    quantized, layers = quantize(policy, "ppo", QuantSpec(2))
    names = {layer.name for layer in layers}
    assert names == {
        "mlp_extractor.policy_net.0.weight",
        "mlp_extractor.policy_net.2.weight",
        "action_net.weight",
    }
    after = quantized.state_dict()
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())  # original untouched
    assert torch.equal(after["value_net.weight"], before["value_net.weight"])
    assert torch.equal(after["mlp_extractor.value_net.0.weight"], before["mlp_extractor.value_net.0.weight"])
    assert torch.equal(after["action_net.bias"], before["action_net.bias"])  # biases stay fp32 by default
    assert not torch.equal(after["action_net.weight"], before["action_net.weight"])
    assert all(layer.step > 0 and layer.mse > 0 for layer in layers)


def test_quantize_bias_option() -> None:
    policy = PPO("MlpPolicy", "CartPole-v1", device="cpu").policy
    _, layers = quantize(policy, "ppo", QuantSpec(4, quantize_bias=True))
    assert "action_net.bias" in {layer.name for layer in layers}


def test_dqn_and_sac_acting_networks() -> None:
    dqn = DQN("MlpPolicy", "CartPole-v1", buffer_size=1, device="cpu").policy
    assert {n for n, _ in acting_layers(dqn, "dqn")} == {"q_net.q_net.0", "q_net.q_net.2", "q_net.q_net.4"}
    sac = SAC("MlpPolicy", "Pendulum-v1", buffer_size=1, device="cpu").policy
    names = {n for n, _ in acting_layers(sac, "sac")}
    assert names and all(n.startswith("actor.") for n in names)


def test_weight_profile_of_a_known_network() -> None:
    policy = PPO("MlpPolicy", "CartPole-v1", device="cpu").policy
    with torch.no_grad():
        for _, module in acting_layers(policy, "ppo"):
            module.weight.fill_(0.5)
        policy.action_net.weight[0, 0] = -1.5
    profile = weight_profile(policy, "ppo")
    assert profile["count"] == 4 * 64 + 64 * 64 + 64 * 2
    assert profile["min"] == -1.5 and profile["max"] == 0.5 and profile["range"] == 2.0
    assert sum(profile["histogram"]) == profile["count"] and profile["histogram"][0] == 1
