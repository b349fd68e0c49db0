"""ARS: one action network, linear or an MLP (a squashed one ends in Tanh); no critic."""

from __future__ import annotations

import torch
from sb3_contrib.ars.policies import ARSPolicy
from torch import nn

from quarl_bench.families import ActingChain, Output, PolicyFamily, network_output, register_family


class ARS(PolicyFamily):
    name = "ars"
    acting = ("features_extractor", "action_net")
    quarl_code = (("action_net",), ())  # not in QuaRL: its policy weights, as QuaRL's ``pi`` selection

    def matches(self, policy: nn.Module) -> bool:
        return isinstance(policy, ARSPolicy)

    def scores(self, policy: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return policy.action_net(policy.features_extractor(x))

    def acting_chain(self, policy: nn.Module) -> ActingChain:
        return ActingChain(policy.features_extractor, tuple(policy.action_net))

    def decision(self, policy: nn.Module, observations: torch.Tensor) -> Output:
        return network_output(
            policy, policy.action_net(policy.extract_features(observations, policy.features_extractor))
        )

    def decision_values(self, policy: nn.Module, observations: torch.Tensor) -> torch.Tensor | None:
        return policy.action_net(policy.extract_features(observations, policy.features_extractor))


register_family(ARS())
