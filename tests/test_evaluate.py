"""Evaluation: agreement arithmetic, normalisation statistics left alone, the same seed giving the same episodes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecNormalize

from quarl_bench.action_modes import ActionMode
from quarl_bench.evaluation.agreement import AgreementMeter
from quarl_bench.evaluation.evaluate import evaluate
from quarl_bench.jobs.grids import EvalSettings, build_jobs
from quarl_bench.methods.ptq import evaluate_job
from quarl_bench.quant.quantize import quantize
from quarl_bench.types import QuantSpec
from quarl_bench.zoo.agents import resolve_agent
from quarl_bench.zoo.forms import load_agent
from quarl_bench.zoo.policy import Policy


def meter_for(space: spaces.Space) -> AgreementMeter:
    adapter = Policy(SimpleNamespace(action_space=space))
    actor = SimpleNamespace(policy=adapter.network, adapter=adapter, mode=ActionMode(), greedy=None)
    return AgreementMeter(actor, reference=adapter)  # type: ignore[arg-type]


def test_agreement_of_discrete_actions() -> None:
    meter = meter_for(spaces.Discrete(3))
    meter._record(np.array([0, 1, 2, 2]), np.array([0, 1, 1, 0]))
    meter._record(np.array([1]), np.array([1]))
    assert meter.summary() == {"decisions": 5, "action_agreement": 0.6}


def test_agreement_of_continuous_actions() -> None:
    meter = meter_for(spaces.Box(-1, 1, (2,)))
    meter._record(np.array([[1.0, 0.0], [3.0, 4.0]]), np.array([[1.0, 0.0], [0.0, 4.0]]))
    # distances 0 and 3, reference norms 1 and 4: mean L2 1.5, mean relative error (0 + 0.75) / 2; the largest
    # per-dimension error as a share of the range (2): 0 and 3 / 2, mean 0.75
    assert meter.summary() == {
        "decisions": 2,
        "action_range_error": 0.75,
        "action_l2": 1.5,
        "action_rel_error": 0.375,
    }


def test_a_regulator_s_action_error_is_a_share_of_the_range_not_of_a_zero_action() -> None:
    """At a set point the fp32 action is ~0: the error relative to its norm would be huge and meaningless (int8 once
    printed 4853739.4 %). The range share is what is reported; the relative figure is left out."""
    meter = meter_for(spaces.Box(-2, 2, (1,)))
    meter._record(np.array([[0.032], [-0.012]]), np.array([[1e-7], [0.0]]))
    summary = meter.summary()
    assert summary["action_range_error"] == pytest.approx((0.032 - 1e-7 + 0.012) / 4 / 2)
    assert "action_rel_error" not in summary


@pytest.mark.slow
def test_normalization_statistics_are_not_updated_by_evaluation(zoo: Path, tmp_path: Path) -> None:
    agent = load_agent(resolve_agent("a2c", "Pendulum-v1", zoo, tmp_path, use_hub=False))
    env = agent.make_env(2, seed=0)
    normalizer = env
    while not isinstance(normalizer, VecNormalize):
        normalizer = normalizer.venv
    before = (normalizer.obs_rms.mean.copy(), normalizer.obs_rms.var.copy(), normalizer.obs_rms.count)
    assert not normalizer.training and not normalizer.norm_reward
    policy, _ = quantize(agent.model.policy, QuantSpec(8))
    evaluate(policy, env, 4, seed=0, reference=agent.model.policy)
    assert np.array_equal(normalizer.obs_rms.mean, before[0]) and np.array_equal(normalizer.obs_rms.var, before[1])
    assert normalizer.obs_rms.count == before[2]
    env.close()


@pytest.mark.slow
def test_same_seed_gives_the_same_episodes_for_a_quantized_job(zoo: Path, tmp_path: Path) -> None:
    ref = resolve_agent("dqn", "Acrobot-v1", zoo, tmp_path, use_hub=False)
    agent = load_agent(ref)
    int8 = build_jobs(ref, [QuantSpec(8)], EvalSettings(episodes=6, seed=3, n_envs=3))[1]
    first, second = evaluate_job(agent, int8, {}), evaluate_job(agent, int8, {})
    assert first.episode_rewards == second.episode_rewards and first.episode_lengths == second.episode_lengths
    other_seed = build_jobs(ref, [QuantSpec(8)], EvalSettings(episodes=6, seed=4, n_envs=3))[1]
    assert evaluate_job(agent, other_seed, {}).episode_lengths != first.episode_lengths
