"""Policy families: every algorithm's policy class belongs to exactly one, and a policy class none of them knows is
one registered family away from quantization, export, the C artifact's chain, the greedy fast path and hardening's
decision output (nothing else changed)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.families import FAMILIES, ActingChain, Output, PolicyFamily
from quarl_bench.types import QuantSpec

OBSERVATIONS = spaces.Box(-1.0, 1.0, (4,), np.float32)


@pytest.mark.parametrize(
    ("algo", "env", "family"),
    [
        ("ppo", "CartPole-v1", "actor-critic"),
        ("a2c", "Pendulum-v1", "actor-critic"),
        ("trpo", "CartPole-v1", "actor-critic"),
        ("ppo_lstm", "CartPole-v1", "actor-critic"),
        ("dqn", "CartPole-v1", "q"),
        ("qrdqn", "CartPole-v1", "quantile"),
        ("ars", "Pendulum-v1", "ars"),
        ("ddpg", "Pendulum-v1", "actor"),
        ("td3", "Pendulum-v1", "actor"),
        ("sac", "Pendulum-v1", "actor"),
        ("tqc", "Pendulum-v1", "actor"),
        ("crossq", "Pendulum-v1", "actor"),
    ],
)
def test_every_algorithm_s_policy_belongs_to_exactly_one_family(algo: str, env: str, family: str) -> None:
    from rl_zoo3 import ALGOS

    model = ALGOS[algo]("MlpLstmPolicy" if algo == "ppo_lstm" else "MlpPolicy", env, device="cpu")
    FAMILIES.load(every=True)
    assert [f.name for f in FAMILIES.entries.values() if f.matches(model.policy)] == [family]


class TwoHeads(BasePolicy):
    """A policy class no built-in family knows: it acts through ``head``; ``value`` never acts."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        super().__init__(observation_space, action_space)
        torch.manual_seed(0)
        self.head = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
        self.value = nn.Linear(4, 1)

    def forward(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return self._predict(obs, deterministic)

    def _predict(self, observation: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return self.head(observation).argmax(dim=1)


class Heads(PolicyFamily):
    """The whole registration a new policy class needs."""

    name = "two-heads"
    acting = ("head",)
    quarl_code = (("head",), ())

    def matches(self, policy: nn.Module) -> bool:
        return isinstance(policy, TwoHeads)

    def scores(self, policy: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return policy.head(x)

    def acting_chain(self, policy: nn.Module) -> ActingChain:
        return ActingChain(None, tuple(policy.head), head="argmax")

    def decision(self, policy: nn.Module, observations: torch.Tensor) -> Output:
        return Output("values", policy.head(observations))

    def decision_values(self, policy: nn.Module, observations: torch.Tensor) -> torch.Tensor | None:
        return policy.head(observations)

    def torch_greedy(self, policy: nn.Module):
        return lambda observation: policy._predict(observation)

    def plain_chain(self, policy: nn.Module) -> list[nn.Module] | None:
        return list(policy.head)


def test_an_unknown_policy_class_still_acts_and_is_refused_where_its_layers_are_needed() -> None:
    from quarl_bench.zoo.policy import as_policy

    policy = TwoHeads(OBSERVATIONS, spaces.Discrete(3)).eval()
    adapter = as_policy(policy)
    observations = np.zeros((5, 4), np.float32)
    assert adapter.greedy()(observations).shape == (5,)  # through predict: no fast path without a family
    assert not adapter.categorical and adapter.decision_values(observations) is None
    with pytest.raises(QuarlError, match="cannot tell which layers of a TwoHeads choose actions"):
        adapter.acting_layers()


def test_a_registered_family_reaches_quantization_export_greedy_and_hardening(monkeypatch) -> None:
    from quarl_bench.deploy.export import DeployablePolicy
    from quarl_bench.deploy.mlp import as_mlp
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.training.harden.student import decision_output
    from quarl_bench.zoo.greedy import greedy_function
    from quarl_bench.zoo.policy import as_policy

    monkeypatch.setitem(FAMILIES.entries, Heads.name, Heads())
    policy = TwoHeads(OBSERVATIONS, spaces.Discrete(3)).eval()
    observations = np.random.default_rng(0).uniform(-1, 1, (64, 4)).astype(np.float32)
    expected = policy.predict(observations, deterministic=True)[0]

    adapter = as_policy(policy)
    assert adapter.family == "two-heads"
    assert [name for name, _ in adapter.acting_layers()] == ["head.0", "head.2"]  # never the value layer
    np.testing.assert_array_equal(adapter.decision_values(observations).argmax(axis=1), expected)

    int4, _ = quantize(policy, QuantSpec("int4"))
    for name in ("head.0.weight", "head.2.weight"):
        assert len(torch.unique(int4.state_dict()[name])) <= 17  # on QuaRL's 4-bit grid (up to 2^4 + 1 levels)
    assert torch.equal(int4.value.weight, policy.value.weight)  # the critic-like layer is left alone

    deployable = DeployablePolicy(policy, OBSERVATIONS)
    np.testing.assert_array_equal(deployable(torch.as_tensor(observations)).numpy(), expected)
    assert as_mlp(deployable).head == "argmax"  # the C artifact's chain
    np.testing.assert_array_equal(greedy_function(policy)(observations), expected)  # the numpy fast path
    assert decision_output(policy, torch.as_tensor(observations)).kind == "values"


def test_an_algorithm_outside_rl_zoo3_is_one_registration(tmp_path, monkeypatch) -> None:
    """sb3-contrib's MaskablePPO, which rl-zoo3 does not list and whose policy class is no ActorCriticPolicy: one
    Algorithm entry naming its model class (``ppo_mask``), and its zips load, are told apart by their policy class, quantize
    through the actor-critic family (it is built like one) and export to C."""
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.wrappers import ActionMasker

    from quarl_bench import AgentQuery, ResultStore, evaluate_agent, export_artifact, resolve
    from quarl_bench.zoo.algorithms import ALGORITHMS
    from quarl_bench.zoo.forms import load_agent
    from quarl_bench.zoo.policy import as_policy

    assert ALGORITHMS.get("ppo_mask").model_class == "sb3_contrib:MaskablePPO"  # one entry of the table
    env = ActionMasker(gym.make("CartPole-v1"), lambda _env: np.ones(2, dtype=bool))
    MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, device="cpu").learn(64).save(tmp_path / "m.zip")

    ref = resolve(AgentQuery("CartPole-v1", model=str(tmp_path / "m.zip"), cache=str(tmp_path / "cache")))
    assert ref.algo == "ppo_mask"
    rows = evaluate_agent(tmp_path / "m.zip", "CartPole-v1", ("fp32", "int4"), episodes=2, store=tmp_path / "q.sqlite")
    assert list(rows["precision"]) == ["fp32", "int4"]
    assert as_policy(load_agent(ref).model.policy).family == "actor-critic"
    with ResultStore(tmp_path / "q.sqlite") as store:
        export_artifact(ref, "c-int8", tmp_path / "art", store, allow_divergent=True, allow_degraded=True)
    assert (tmp_path / "art" / "policy.c").is_file()
