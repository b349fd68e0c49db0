"""PPO/A2C on quantized rollouts: fp32 rollouts are SB3's, quantized ones act on the PTQ grid, the buffer holds what
the corrections need."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import A2C, PPO

from quarl_bench.errors import QuarlError
from quarl_bench.quant.layers import selected_tensors
from quarl_bench.training.quantized_rollouts import RolloutA2C, RolloutPPO

PPO_KWARGS = {"n_steps": 32, "batch_size": 32, "n_epochs": 2, "seed": 3, "device": "cpu"}


def ppo(precision: str, correction: str = "none", cap: float = 2.0, backend: str = "torch", env: str = "CartPole-v1"):
    model = RolloutPPO("MlpPolicy", env, **PPO_KWARGS)
    model.use_quantized_rollouts(precision, correction, cap, backend)
    return model


@pytest.mark.parametrize(
    ("sb3_class", "rollout_class", "kwargs"),
    [(PPO, RolloutPPO, PPO_KWARGS), (A2C, RolloutA2C, {"n_steps": 5, "seed": 3})],
)
def test_fp32_rollouts_train_as_sb3(sb3_class, rollout_class, kwargs) -> None:
    """Same seed, same updates: only the critic's values are computed in one batch instead of per step."""
    torch.set_num_threads(1)
    base = sb3_class("MlpPolicy", "CartPole-v1", **kwargs)
    base.learn(320)
    ours = rollout_class("MlpPolicy", "CartPole-v1", **kwargs)
    ours.use_quantized_rollouts("fp32", "none", 2.0)
    ours.learn(320)
    for expected, got in zip(base.policy.parameters(), ours.policy.parameters(), strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert max(point["kl"] for point in ours.rollout_log) < 1e-6  # batched vs per-step forward: float32 rounding only
    assert {point["agreement"] for point in ours.rollout_log} == {1.0}


def test_int4_behaviour_acts_on_the_grid_of_the_learner_weights() -> None:
    model = ppo("int4")
    model.learn(64)  # two updates: the copy was re-quantized after each
    behaviour = model.behaviour
    learner = {t.name: t for t in selected_tensors(model.policy, "paper")}
    for tensor in behaviour.tensors:
        fp32 = getattr(learner[tensor.name].module, tensor.kind).detach()
        acting = getattr(tensor.module, tensor.kind).detach()
        # QuaRL's 4-bit grid of the learner's current weights (docs/quantization.md): multiples of
        # (|min| + |max|) / 16, each weight on the nearest one, at most 17 levels
        step = (fp32.min().abs() + fp32.max().abs()) / 16
        codes = acting / step
        assert torch.allclose(codes, torch.round(codes), atol=1e-3)
        assert float((acting - fp32).abs().max()) <= float(step) / 2 + 1e-6
        assert len(torch.unique(acting)) <= 17 and not torch.equal(acting, fp32)
    # the value head stays the learner's: values come from the fp32 critic
    assert torch.equal(behaviour.copy.value_net.weight, model.policy.value_net.weight)


@pytest.mark.parametrize("correction", ["none", "tis", "mis"])
def test_buffer_holds_what_the_correction_needs(correction: str) -> None:
    model = ppo("int2", correction, cap=1.5)
    model.learn(32)  # one rollout, one update
    buffer = model.rollout_buffer
    observations = torch.as_tensor(buffer.observations.reshape(-1, 4))
    actions = torch.as_tensor(buffer.actions.reshape(-1)).long()
    # before the update: the learner's fp32 policy of the rollout is gone; rebuild both log-probs from the copy's grid
    point = model.rollout_log[-1]
    assert point["timesteps"] == 32 and 0 < point["agreement"] <= 1
    weights = buffer.weights.reshape(-1)
    if correction == "none":
        assert np.all(weights == 1.0)
    elif correction == "tis":
        assert weights.max() <= 1.5 and not np.all(weights == 1.0)
    else:
        assert set(np.unique(weights)) <= {0.0, 1.0}
        assert np.mean(weights == 0.0) == pytest.approx(point["share_masked"])
    assert observations.shape[0] == actions.shape[0] == 32


def test_naive_and_corrected_losses_take_different_old_log_probs() -> None:
    """none: PPO's ratio against log π_q; tis: against the fp32 policy's log π of the same actions."""
    logs = {}
    for correction in ("none", "tis"):
        model = ppo("int2", correction)
        _, callback = model._setup_learn(32, None)
        model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
        buffer = model.rollout_buffer
        observations = torch.as_tensor(buffer.observations.reshape(-1, 4))
        actions = torch.as_tensor(buffer.actions.reshape(-1)).long()
        with torch.no_grad():
            log_p = model.policy.get_distribution(observations).log_prob(actions).numpy()
            log_q = model.behaviour.copy.get_distribution(observations).log_prob(actions).numpy()
        np.testing.assert_allclose(buffer.behaviour_log_probs.reshape(-1), log_q, atol=1e-5)
        logs[correction] = (buffer.log_probs.reshape(-1), log_p, log_q)
    stored, log_p, log_q = logs["none"]
    np.testing.assert_allclose(stored, log_q, atol=1e-5)
    stored, log_p, log_q = logs["tis"]
    np.testing.assert_allclose(stored, log_p, atol=1e-5)
    assert not np.allclose(log_p, log_q, atol=1e-3)


def test_onnxruntime_int8_behaviour_runs_int8_kernels() -> None:
    model = ppo("int8", "tis", backend="onnxruntime")
    assert model.behaviour.session.int8
    observations = torch.randn(16, 4)
    with torch.no_grad():
        fp32 = model.policy.get_distribution(observations).distribution.probs
        int8 = model.behaviour.distribution(observations).distribution.probs
    assert torch.allclose(fp32, int8, atol=0.02) and not torch.equal(fp32, int8)
    model.learn(64)
    assert len(model.rollout_log) == 2 and model.rollout_log[-1]["ratio_max"] < 1.5


def test_gsde_policy_acts_quantized() -> None:
    """Pendulum's rl-zoo3 PPO explores with gSDE: the behaviour copy samples its own exploration matrices."""
    model = RolloutPPO(
        "MlpPolicy", "Pendulum-v1", use_sde=True, sde_sample_freq=4, n_steps=64, batch_size=64, n_epochs=1, seed=0
    )
    model.use_quantized_rollouts("int4", "tis", 2.0)
    model.learn(64)
    point = model.rollout_log[-1]
    assert 0 < point["kl"] < 1 and 0 < point["agreement"] < 1
    assert point["entropy_behaviour"] != point["entropy_fp32"]


def test_bad_settings_are_named() -> None:
    with pytest.raises(QuarlError, match="bad correction 'is'"):
        ppo("int8", "is")
    with pytest.raises(QuarlError, match="bad cap 0.5"):
        ppo("int8", "tis", cap=0.5)
    with pytest.raises(QuarlError, match="expected int8"):
        ppo("int4", backend="onnxruntime")
