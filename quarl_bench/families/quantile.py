"""QR-DQN: the quantile network acts (argmax of the mean quantile per action)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from sb3_contrib.qrdqn.policies import QRDQNPolicy

from quarl_bench.families import ActingChain, NetworkInput, Output, PolicyFamily, PolicyObject, register_family


class Quantile(PolicyFamily):
    name = "quantile"
    acting = ("quantile_net",)
    quarl_code = (("quantile_net", "quantile_net_target"), ())

    def matches(self, policy: PolicyObject) -> bool:
        return isinstance(policy, QRDQNPolicy)

    def scores(self, policy: PolicyObject, x: NetworkInput) -> torch.Tensor:
        net = policy.quantile_net
        quantiles = net.quantile_net(net.features_extractor(x)).view(-1, net.n_quantiles, net.action_space.n)
        return quantiles.mean(dim=1)

    def acting_chain(self, policy: PolicyObject) -> ActingChain:
        net = policy.quantile_net
        return ActingChain(net.features_extractor, tuple(net.quantile_net), "quantile-argmax", int(net.n_quantiles))

    def decision(self, policy: PolicyObject, observations: torch.Tensor) -> Output:
        return Output("values", self.decision_values(policy, observations))

    def decision_values(self, policy: PolicyObject, observations: torch.Tensor) -> torch.Tensor:
        return policy.quantile_net(observations).mean(dim=1)

    def torch_greedy(self, policy: PolicyObject) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return lambda observation: policy._predict(observation, deterministic=True)


register_family(Quantile())
