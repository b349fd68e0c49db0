"""The quantizer: exact grids, identity, float casts, granularity, idempotence, STE, acting layers only."""

from __future__ import annotations

import pytest
import torch
from stable_baselines3 import DDPG, DQN, PPO, SAC

from quarl_bench.quant.affine import fake_quant
from quarl_bench.quant.layers import acting_layers, selected_tensors
from quarl_bench.quant.quantize import histogram_kl, quantize, quantize_tensor, weight_profile
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


def test_8bit_grid_has_exactly_257_levels_like_the_original_code() -> None:
    w = torch.linspace(-1.0, 1.0, 10_001, dtype=torch.float64)  # step 2 / 256: codes -128 ... 128, all used
    q = fake_quant(w, 8)
    assert torch.equal(torch.unique(q), torch.arange(-128, 129, dtype=torch.float64) * 2**-7)
    assert (q - w).abs().max() <= 2**-8


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
    quantized, layers = quantize(policy, QuantSpec(2))
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
    _, layers = quantize(policy, QuantSpec(4, quantize_bias=True))
    assert "action_net.bias" in {layer.name for layer in layers}


def test_dqn_and_sac_acting_networks() -> None:
    dqn = DQN("MlpPolicy", "CartPole-v1", buffer_size=1, device="cpu").policy
    assert {n for n, _ in acting_layers(dqn)} == {"q_net.q_net.0", "q_net.q_net.2", "q_net.q_net.4"}
    sac = SAC("MlpPolicy", "Pendulum-v1", buffer_size=1, device="cpu").policy
    names = {n for n, _ in acting_layers(sac)}
    assert names and all(n.startswith("actor.") for n in names)


def test_weight_profile_of_a_known_network() -> None:
    policy = PPO("MlpPolicy", "CartPole-v1", device="cpu").policy
    with torch.no_grad():
        for _, module in acting_layers(policy):
            module.weight.fill_(0.5)
        policy.action_net.weight[0, 0] = -1.5
    profile = weight_profile(policy)
    assert profile["count"] == 4 * 64 + 64 * 64 + 64 * 2
    assert profile["min"] == -1.5 and profile["max"] == 0.5 and profile["range"] == 2.0
    assert sum(profile["histogram"]) == profile["count"] and profile["histogram"][0] == 1


LAYER_NAMES = {  # net_arch [8]: one hidden layer; QuaRL code rules in quant/layers.py
    "a2c": (
        ["mlp_extractor.policy_net.0.weight", "action_net.weight"],
        [
            "mlp_extractor.policy_net.0.weight",
            "mlp_extractor.value_net.0.weight",
            "mlp_extractor.value_net.0.bias",
            "action_net.weight",
            "value_net.weight",
            "value_net.bias",
        ],
    ),
    "dqn": (
        ["q_net.q_net.0.weight", "q_net.q_net.2.weight"],
        ["q_net.q_net.0.weight", "q_net.q_net.2.weight", "q_net_target.q_net.0.weight", "q_net_target.q_net.2.weight"],
    ),
    "qrdqn": (
        ["quantile_net.quantile_net.0.weight", "quantile_net.quantile_net.2.weight"],
        [
            "quantile_net.quantile_net.0.weight",
            "quantile_net.quantile_net.2.weight",
            "quantile_net_target.quantile_net.0.weight",
            "quantile_net_target.quantile_net.2.weight",
        ],
    ),
    "ddpg": (
        ["actor.mu.0.weight", "actor.mu.2.weight"],
        [f"{net}.qf0.{i}.{kind}" for net in ("critic", "critic_target") for i in (0, 2) for kind in ("weight", "bias")],
    ),
    "td3": (
        ["actor.mu.0.weight", "actor.mu.2.weight"],
        [
            f"{net}.qf{q}.{i}.{kind}"
            for net in ("critic", "critic_target")
            for q in (0, 1)
            for i in (0, 2)
            for kind in ("weight", "bias")
        ],
    ),
    "sac": (
        ["actor.latent_pi.0.weight", "actor.mu.weight", "actor.log_std.weight"],
        [
            f"{net}.qf{q}.{i}.{kind}"
            for net in ("critic", "critic_target")
            for q in (0, 1)
            for i in (0, 2)
            for kind in ("weight", "bias")
        ],
    ),
}
LAYER_NAMES["ppo"] = LAYER_NAMES["a2c"]


@pytest.mark.parametrize("algo", sorted(LAYER_NAMES))
def test_quantized_tensor_names_in_both_layer_modes(algo: str) -> None:
    from rl_zoo3 import ALGOS

    env_id = "Pendulum-v1" if algo in ("ddpg", "td3", "sac") else "CartPole-v1"
    kwargs = {"buffer_size": 10} if algo not in ("a2c", "ppo") else {}
    model = ALGOS[algo]("MlpPolicy", env_id, policy_kwargs={"net_arch": [8]}, device="cpu", **kwargs)
    paper, quarl_code = LAYER_NAMES[algo]
    assert [t.name for t in selected_tensors(model.policy, "paper")] == paper
    assert [t.name for t in selected_tensors(model.policy, "quarl-code")] == quarl_code
    _, stats = quantize(model.policy, QuantSpec(8, layers="quarl-code"))
    assert [layer.name for layer in stats] == quarl_code


def test_quarl_code_mode_leaves_a_ddpg_actor_in_fp32() -> None:
    model = DDPG("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [8]}, buffer_size=10, device="cpu")
    quantized, _ = quantize(model.policy, QuantSpec(2, layers="quarl-code"))
    for name, value in model.policy.actor.state_dict().items():
        assert torch.equal(quantized.actor.state_dict()[name], value)
    assert not torch.equal(quantized.critic.qf0[0].weight, model.policy.critic.qf0[0].weight)
