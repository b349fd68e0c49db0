"""DQN: the Q-network acts (argmax of its values); its target network does not."""

from __future__ import annotations

from collections.abc import Callable

import torch
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.dqn.policies import DQNPolicy
from torch import nn

from quarl_bench.families import ActingChain, NetworkInput, Output, PolicyFamily, PolicyObject, register_family


class QValues(PolicyFamily):
    name = "q"
    acting = ("q_net",)
    quarl_code = (("q_net", "q_net_target"), ())  # every weight under action_value/state_value, online and target

    def matches(self, policy: PolicyObject) -> bool:
        return isinstance(policy, DQNPolicy)

    def scores(self, policy: PolicyObject, x: NetworkInput) -> torch.Tensor:
        return policy.q_net.q_net(policy.q_net.features_extractor(x))

    def acting_chain(self, policy: PolicyObject) -> ActingChain:
        return ActingChain(policy.q_net.features_extractor, tuple(policy.q_net.q_net), head="argmax")

    def decision(self, policy: PolicyObject, observations: torch.Tensor) -> Output:
        return Output("values", policy.q_net(observations))

    def decision_values(self, policy: PolicyObject, observations: torch.Tensor) -> torch.Tensor | None:
        return policy.q_net(observations)

    def torch_greedy(self, policy: PolicyObject) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return lambda observation: policy._predict(observation, deterministic=True)

    def plain_chain(self, policy: PolicyObject) -> list[nn.Module] | None:
        return list(policy.q_net.q_net) if isinstance(policy.q_net.features_extractor, FlattenExtractor) else None


register_family(QValues())
