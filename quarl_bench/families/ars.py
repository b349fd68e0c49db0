"""ARS: one action network, linear or an MLP (a squashed one ends in Tanh); no critic."""

from __future__ import annotations

import torch
from sb3_contrib.ars.policies import ARSPolicy

from quarl_bench.families import (
    ActingChain,
    NetworkInput,
    Output,
    PolicyFamily,
    PolicyObject,
    network_output,
    register_family,
)


class ARS(PolicyFamily):
    name = "ars"
    acting = ("features_extractor", "action_net")
    quarl_code = (("action_net",), ())  # not in QuaRL: its policy weights, as QuaRL's ``pi`` selection

    def matches(self, policy: PolicyObject) -> bool:
        return isinstance(policy, ARSPolicy)

    def scores(self, policy: PolicyObject, x: NetworkInput) -> torch.Tensor:
        return policy.action_net(policy.features_extractor(x))

    def acting_chain(self, policy: PolicyObject) -> ActingChain:
        return ActingChain(policy.features_extractor, tuple(policy.action_net))

    def decision(self, policy: PolicyObject, observations: torch.Tensor) -> Output:
        return network_output(
            policy, policy.action_net(policy.extract_features(observations, policy.features_extractor))
        )

    def decision_values(self, policy: PolicyObject, observations: torch.Tensor) -> torch.Tensor | None:
        return policy.action_net(policy.extract_features(observations, policy.features_extractor))


register_family(ARS())
