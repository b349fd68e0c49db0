"""D4PG (Barth-Maron et al. 2018) from SB3's pieces: TD3's deterministic actor, optimizers, n-step replay buffer
and ``polyak_update``. Only the distributional critic (categorical, C51-style: logits over a fixed support) and
its loss (cross-entropy to the projected n-step Bellman target) are new. No target policy smoothing, no delayed
actor updates, one critic: the paper's algorithm, not TD3's.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3 import TD3
from stable_baselines3.common.policies import BaseModel
from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, create_mlp
from stable_baselines3.common.utils import polyak_update
from stable_baselines3.td3.policies import TD3Policy
from torch import nn


def categorical_projection(
    next_probs: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """Project the distribution of ``rewards + discounts * Z`` (``Z`` on ``support`` with ``next_probs``) back onto
    ``support`` (C51's projection): each shifted atom, clipped to the support's range, splits its probability
    between its two neighbouring atoms in proportion to closeness. An atom landing exactly on a support point
    (floor == ceil, the classic off-by-one that loses its mass) keeps all of it there.

    :param next_probs: [batch, atoms] probabilities of the next state's return distribution.
    :param rewards: [batch] or [batch, 1] (n-step) rewards.
    :param discounts: [batch] or [batch, 1]: gamma ** n, 0 where the episode terminated.
    :param support: [atoms] evenly spaced return values, increasing.
    :returns: [batch, atoms] target probabilities (each row sums to 1).
    """
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (len(support) - 1)
    shifted = (rewards.reshape(-1, 1) + discounts.reshape(-1, 1) * support[None]).clamp(v_min, v_max)
    position = (shifted - v_min) / delta  # fractional index into the support, in [0, atoms - 1]
    lower, upper = position.floor().long(), position.ceil().long()
    upper_share = position - lower
    lower_share = 1.0 - upper_share  # = upper - position, or 1 when position is a whole number
    target = torch.zeros_like(next_probs)
    target.scatter_add_(1, lower, next_probs * lower_share)
    target.scatter_add_(1, upper, next_probs * upper_share)
    return target


class DistributionalCritic(BaseModel):
    """Z(s, a): logits over ``n_atoms`` returns evenly spaced on [v_min, v_max]."""

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        net_arch: list[int],
        features_extractor: BaseFeaturesExtractor,
        features_dim: int,
        activation_fn: type[nn.Module] = nn.ReLU,
        normalize_images: bool = True,
        share_features_extractor: bool = True,
        n_atoms: int = 51,
        v_min: float = -150.0,
        v_max: float = 150.0,
    ) -> None:
        super().__init__(
            observation_space, action_space, features_extractor=features_extractor, normalize_images=normalize_images
        )
        self.share_features_extractor = share_features_extractor
        action_dim = get_action_dim(action_space)
        self.z_net = nn.Sequential(*create_mlp(features_dim + action_dim, n_atoms, net_arch, activation_fn))
        self.support: torch.Tensor
        self.register_buffer("support", torch.linspace(v_min, v_max, n_atoms))

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        extractor = self.features_extractor
        assert extractor is not None  # TD3's policy builds the critic with one
        with torch.set_grad_enabled(not self.share_features_extractor):
            features = self.extract_features(obs, extractor)
        return self.z_net(torch.cat([features, actions], dim=1))

    def q_value(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The distribution's mean: Q(s, a)."""
        return (F.softmax(self(obs, actions), dim=1) * self.support).sum(dim=1)


class D4PGPolicy(TD3Policy):
    """TD3's policy (deterministic actor, target networks, optimizers) with one distributional critic."""

    def __init__(
        self, *args: Any, n_atoms: int = 51, v_min: float = -150.0, v_max: float = 150.0, **kwargs: Any
    ) -> None:
        # read by make_critic in _build
        self.distribution: dict[str, Any] = {"n_atoms": n_atoms, "v_min": v_min, "v_max": v_max}
        super().__init__(*args, **kwargs)

    def make_critic(  # type: ignore[override]  # a categorical critic in place of TD3's twin Q-networks
        self, features_extractor: BaseFeaturesExtractor | None = None
    ) -> DistributionalCritic:
        kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
        kwargs.pop("n_critics", None)
        return DistributionalCritic(**kwargs, **self.distribution).to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return super()._get_constructor_parameters() | self.distribution


class D4PG(TD3):
    """Distributed Distributional DDPG's learner: n-step returns (SB3's ``NStepReplayBuffer``), a categorical
    critic trained by cross-entropy to the projected target, the actor ascending the critic's mean, polyak-averaged
    target networks (``tau``). Exploration is the caller's (``action_noise``, or ActorQ's per-actor sigmas)."""

    policy_aliases = {"MlpPolicy": D4PGPolicy}  # noqa: RUF012 - SB3's class attribute

    def __init__(
        self, policy: str | type[D4PGPolicy], env: Any, learning_rate: float = 1e-4, n_steps: int = 5, **kwargs: Any
    ) -> None:
        kwargs |= {"policy_delay": 1, "target_policy_noise": 0.0, "target_noise_clip": 0.0}
        super().__init__(policy, env, learning_rate=learning_rate, n_steps=n_steps, **kwargs)

    def train(self, gradient_steps: int, batch_size: int = 256) -> None:
        self.policy.set_training_mode(True)
        self._update_learning_rate([self.actor.optimizer, self.critic.optimizer])
        critic_losses: list[float] = []
        actor_losses: list[float] = []
        replay, critic, critic_target = self.replay_buffer, self.critic, self.critic_target
        assert replay is not None  # SB3 builds it in _setup_model
        assert isinstance(critic, DistributionalCritic) and isinstance(critic_target, DistributionalCritic)
        for _ in range(gradient_steps):
            self._n_updates += 1
            data = replay.sample(batch_size, env=self._vec_normalize_env)
            discounts = data.discounts if data.discounts is not None else torch.full_like(data.rewards, self.gamma)
            with torch.no_grad():
                next_logits = critic_target(data.next_observations, self.actor_target(data.next_observations))
                target = categorical_projection(
                    F.softmax(next_logits, dim=1), data.rewards, (1.0 - data.dones) * discounts, critic.support
                )
            critic_loss = -(target * F.log_softmax(critic(data.observations, data.actions), dim=1)).sum(1).mean()
            critic.optimizer.zero_grad()
            critic_loss.backward()
            critic.optimizer.step()

            actor_loss = -critic.q_value(data.observations, self.actor(data.observations)).mean()
            self.actor.optimizer.zero_grad()
            actor_loss.backward()
            self.actor.optimizer.step()

            polyak_update(critic.parameters(), critic_target.parameters(), self.tau)
            polyak_update(self.actor.parameters(), self.actor_target.parameters(), self.tau)
            polyak_update(self.critic_batch_norm_stats, self.critic_batch_norm_stats_target, 1.0)
            polyak_update(self.actor_batch_norm_stats, self.actor_batch_norm_stats_target, 1.0)
            critic_losses.append(critic_loss.item())
            actor_losses.append(actor_loss.item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/critic_loss", sum(critic_losses) / max(len(critic_losses), 1))
        self.logger.record("train/actor_loss", sum(actor_losses) / max(len(actor_losses), 1))
