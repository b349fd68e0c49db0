"""DDPG, TD3, SAC, TQC and CrossQ: a separate actor acts, never the critics. SAC, TQC and CrossQ act with the
tanh of their Gaussian's mean; DDPG and TD3's ``mu`` ends in tanh."""

from __future__ import annotations

import torch
from sb3_contrib.tqc.policies import TQCPolicy
from stable_baselines3.sac.policies import SACPolicy
from stable_baselines3.td3.policies import TD3Policy
from torch import nn

from quarl_bench.families import ActingChain, NetworkInput, Output, PolicyFamily, PolicyObject, register_family


class SeparateActor(PolicyFamily):
    name = "actor"
    acting = ("actor",)
    quarl_code = ((), ("critic", "critic_target"))  # the actor's variables have no ``w``: the critic's, all of them

    def matches(self, policy: PolicyObject) -> bool:
        return isinstance(getattr(policy, "actor", None), nn.Module)

    def squashed(self, policy: PolicyObject) -> bool:
        return True

    def scores(self, policy: PolicyObject, x: NetworkInput) -> torch.Tensor:
        actor = policy.actor
        if hasattr(actor, "latent_pi"):
            return torch.tanh(actor.mu(actor.latent_pi(actor.features_extractor(x))))
        return actor.mu(actor.features_extractor(x))

    def acting_chain(self, policy: PolicyObject) -> ActingChain:
        actor = policy.actor
        if hasattr(actor, "latent_pi"):  # CrossQ's batch norms are folded by the reader
            return ActingChain(actor.features_extractor, (*actor.latent_pi, actor.mu, nn.Tanh()), "unscale")
        return ActingChain(actor.features_extractor, tuple(actor.mu), "unscale")

    def decision(self, policy: PolicyObject, observations: torch.Tensor) -> Output:
        actor = policy.actor
        actions = actor(observations, deterministic=True) if hasattr(actor, "action_dist") else actor(observations)
        return Output("actions", actions)

    def predicts_continuous(self, policy: PolicyObject) -> bool:
        return isinstance(policy, SACPolicy | TD3Policy | TQCPolicy)  # CrossQ keeps predict (not checked equal)


register_family(SeparateActor())
