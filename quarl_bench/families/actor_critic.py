"""PPO, A2C, TRPO and recurrent PPO: any SB3 ``ActorCriticPolicy`` (the actor's path: features extractor, the
policy half of the MLP extractor, the action net; a recurrent policy's actor LSTM)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.distributions import CategoricalDistribution
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import FlattenExtractor
from torch import nn

from quarl_bench.families import (
    ActingChain,
    NetworkInput,
    Output,
    PolicyFamily,
    PolicyObject,
    distribution_output,
    register_family,
)

SHARED_EXTRACTOR = "features_extractor"
SHAPE = ("pi_features_extractor", "mlp_extractor", "action_net", "value_net", "get_distribution", "action_dist")


class ActorCritic(PolicyFamily):
    name = "actor-critic"
    acting = (
        "pi_features_extractor",
        SHARED_EXTRACTOR,
        "lstm_actor",  # a recurrent policy's (ppo_lstm): the actor's LSTM, its gates' weights
        "mlp_extractor.policy_net",
        "action_net",
    )
    quarl_code = (
        ("lstm_actor", "mlp_extractor.policy_net", "action_net"),  # recurrent PPO is not in QuaRL: ``pi`` weights
        (
            "lstm_critic",
            "features_extractor",
            "pi_features_extractor",
            "vf_features_extractor",
            "mlp_extractor.value_net",
            "value_net",
        ),
    )

    def matches(self, policy: PolicyObject) -> bool:
        # SB3's class, or one built like it (sb3-contrib's MaskableActorCriticPolicy is not its subclass)
        return isinstance(policy, ActorCriticPolicy) or all(hasattr(policy, name) for name in SHAPE)

    def acting_prefixes(self, policy: PolicyObject) -> tuple[str, ...]:
        # the shared extractor acts only when the actor shares it (SB3's default); a critic's own one does not
        pi_extractor = getattr(policy, "pi_features_extractor", None)
        if pi_extractor is not None and getattr(policy, "vf_features_extractor", None) is not pi_extractor:
            return tuple(prefix for prefix in self.acting if prefix != SHARED_EXTRACTOR)
        return self.acting

    def scores(self, policy: PolicyObject, x: NetworkInput) -> torch.Tensor:
        return policy.action_net(policy.mlp_extractor.forward_actor(policy.pi_features_extractor(x)))

    def acting_chain(self, policy: PolicyObject) -> ActingChain:
        return ActingChain(policy.pi_features_extractor, (*policy.mlp_extractor.policy_net, policy.action_net))

    def decision(self, policy: PolicyObject, observations: torch.Tensor) -> Output:
        return distribution_output(policy, policy.get_distribution(observations))

    def decision_values(self, policy: PolicyObject, observations: torch.Tensor) -> torch.Tensor | None:
        return policy.get_distribution(observations).distribution.logits

    def categorical(self, policy: PolicyObject) -> bool:
        from sb3_contrib.common.maskable.distributions import MaskableCategoricalDistribution

        # MaskablePPO's distribution is categorical too, though no subclass of SB3's
        return isinstance(policy.action_dist, CategoricalDistribution | MaskableCategoricalDistribution)

    def torch_greedy(self, policy: PolicyObject) -> Callable[[torch.Tensor], torch.Tensor] | None:
        if isinstance(policy, RecurrentActorCriticPolicy) or not self.categorical(policy):
            return None  # a recurrent one acts on its state too: predict carries it

        def act(observation: torch.Tensor) -> torch.Tensor:
            features = policy.extract_features(observation, policy.pi_features_extractor)
            logits = policy.action_net(policy.mlp_extractor.forward_actor(features))
            # SB3's mode: argmax of the probabilities of the normalised logits (argmax of the raw logits could break
            # a rounding tie the other way)
            return torch.softmax(logits - logits.logsumexp(dim=-1, keepdim=True), dim=-1).argmax(dim=1)

        return act

    def plain_chain(self, policy: PolicyObject) -> list[nn.Module] | None:
        if isinstance(policy, RecurrentActorCriticPolicy) or not isinstance(
            policy.pi_features_extractor, FlattenExtractor
        ):
            return None
        return [*policy.mlp_extractor.policy_net, policy.action_net]

    def predicts_continuous(self, policy: PolicyObject) -> bool:
        return not isinstance(policy, RecurrentActorCriticPolicy)

    def play(self, policy: PolicyObject, states: np.ndarray) -> None:
        if not isinstance(policy, RecurrentActorCriticPolicy):
            return super().play(policy, states)
        from quarl_bench.families.recurrent import act_on

        act_on(policy, states)

    def state_lstm(self, policy: PolicyObject) -> nn.LSTM | None:
        return policy.lstm_actor if isinstance(policy, RecurrentActorCriticPolicy) else None


register_family(ActorCritic())
