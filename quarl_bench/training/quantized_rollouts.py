"""On-policy learning from quantized rollouts (FlashRL / verl-style): a quantized copy of the policy plays the env,
the fp32 learner trains on what it collected.

Per rollout, as in those systems:

1. the behaviour policy (``training/behaviour.py``, re-quantized after every update) acts; the buffer keeps its
   log-probabilities log π_q(a|s);
2. the fp32 learner re-reads the whole buffer in one batch: its values (for GAE) and log π(a|s) of the actions taken;
3. the loss uses the fp32 policy. ``none`` is the naive loss, PPO's ratio taken against π_q as if it were the old
   policy. ``tis`` takes the ratio against π and multiplies the policy-gradient term of each sample by min(π/π_q, C);
   ``mis`` drops (weight 0) the samples whose π/π_q lies outside [1/C, C]. Value and entropy terms are unweighted.

The diagnostics of every rollout (``training/mismatch.py``) go into ``rollout_log``, one dict per update.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.utils import explained_variance, obs_as_tensor, safe_mean
from torch.distributions import Distribution
from torch.nn import functional as F

from quarl_bench.errors import QuarlError
from quarl_bench.training.behaviour import BehaviourPolicy
from quarl_bench.training.mismatch import (
    concat_distributions,
    correction_weights,
    mismatch_stats,
    torch_distribution,
)
from quarl_bench.training.options import ROLLOUT_CORRECTIONS

LEARNER_CHUNK = 4096  # states per batched fp32 forward when the learner re-reads a rollout


class WeightedSamples(NamedTuple):
    observations: th.Tensor
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    weights: th.Tensor  # each sample's weight on the policy-gradient term


class WeightedRolloutBuffer(RolloutBuffer):
    """SB3's rollout buffer plus one policy-gradient weight per sample, shuffled with the others, and the behaviour
    policy's log-probabilities (``log_probs`` holds the ones PPO's ratio is taken against)."""

    def reset(self) -> None:
        super().reset()
        self.weights = np.ones((self.buffer_size, self.n_envs), dtype=np.float32)
        self.behaviour_log_probs = np.zeros((self.buffer_size, self.n_envs), dtype=np.float32)

    def get(self, batch_size: int | None = None):
        if not self.generator_ready:
            self.weights = self.swap_and_flatten(self.weights)
        yield from super().get(batch_size)

    def _get_samples(  # type: ignore[override]  # SB3's samples and one weight each (a NamedTuple takes no subclass)
        self, batch_inds: np.ndarray, env=None
    ) -> WeightedSamples:
        samples = super()._get_samples(batch_inds, env)
        return WeightedSamples(*samples, self.to_torch(self.weights[batch_inds].flatten()))


class QuantizedRollouts(OnPolicyAlgorithm):
    """Mixin over SB3's PPO/A2C (first in their bases, so SB3's base is the one ``PPO``/``A2C`` bring):
    ``collect_rollouts`` played by the behaviour policy, then the learner's re-read."""

    behaviour: BehaviourPolicy
    correction: str
    cap: float
    rollout_log: list[dict[str, float | None]]  # reward None: no episode has ended yet

    def use_quantized_rollouts(self, precision: str, correction: str, cap: float, backend: str = "torch") -> None:
        """Switch this (fresh) model to quantized rollouts; call before ``learn``."""
        if correction not in ROLLOUT_CORRECTIONS:
            raise QuarlError(f"bad correction {correction!r}: expected one of {', '.join(ROLLOUT_CORRECTIONS)}")
        if not cap >= 1:
            raise QuarlError(f"bad cap {cap}: expected a ratio cap C >= 1")
        if isinstance(self.observation_space, spaces.Dict):
            raise QuarlError("quantized rollouts take Box observations: Dict observation spaces are not supported")
        self.correction, self.cap = correction, cap
        self.behaviour = BehaviourPolicy(self.policy, precision, backend)
        buffer = self.rollout_buffer
        self.rollout_buffer = WeightedRolloutBuffer(
            buffer.buffer_size,
            self.observation_space,
            self.action_space,
            device=self.device,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            n_envs=self.n_envs,
        )
        self.rollout_log = []
        self._clock = {
            "rollout": 0.0,
            "learner_pass": 0.0,
            "train": 0.0,
            "requantize": 0.0,
            "start": time.perf_counter(),
        }

    def weighted_batches(self, batch_size: int | None) -> Iterator[WeightedSamples]:
        """The rollout's samples with their weights, shuffled in minibatches (one batch: ``None``)."""
        buffer = self.rollout_buffer
        assert isinstance(buffer, WeightedRolloutBuffer)  # use_quantized_rollouts put it there
        yield from buffer.get(batch_size)

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "behaviour", "rollout_log", "_clock"]

    def collect_rollouts(self, env, callback, rollout_buffer, n_rollout_steps: int) -> bool:
        """SB3's ``OnPolicyAlgorithm.collect_rollouts`` with the behaviour policy acting and no per-step critic."""
        assert self._last_obs is not None, "No previous observation was provided"
        self.policy.set_training_mode(False)
        started = time.perf_counter()
        n_steps = 0
        rollout_buffer.reset()
        if self.use_sde:
            self.behaviour.reset_noise(env.num_envs)
        callback.on_rollout_start()
        behaviour_dists: list[Distribution] = []
        truncated: list[tuple[int, int, np.ndarray]] = []
        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.behaviour.reset_noise(env.num_envs)
            with th.no_grad():
                obs_tensor = obs_as_tensor(self._last_obs, self.device)
                assert isinstance(obs_tensor, th.Tensor)  # Box observations (Dict spaces are refused)
                action_tensor, log_probs, dist = self.behaviour.act(obs_tensor)
            behaviour_dists.append(dist)
            actions = action_tensor.cpu().numpy()
            clipped_actions = actions
            if isinstance(self.action_space, spaces.Box):
                if self.policy.squash_output:
                    clipped_actions = self.policy.unscale_action(clipped_actions)
                else:
                    clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)
            new_obs, rewards, dones, infos = env.step(clipped_actions)
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            n_steps += 1
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(-1, 1)
            for idx, done in enumerate(dones):  # timeouts bootstrap with the fp32 critic, after the rollout
                if (
                    done
                    and infos[idx].get("terminal_observation") is not None
                    and infos[idx].get("TimeLimit.truncated", False)
                ):
                    truncated.append((n_steps - 1, idx, infos[idx]["terminal_observation"]))
            rollout_buffer.add(
                self._last_obs, actions, rewards, self._last_episode_starts, th.zeros(env.num_envs), log_probs
            )
            self._last_obs = new_obs
            self._last_episode_starts = dones
        acted = time.perf_counter()
        self._learner_pass(rollout_buffer, behaviour_dists, truncated, new_obs, dones)
        self._clock["rollout"] += acted - started
        self._clock["learner_pass"] += time.perf_counter() - acted
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _learner_pass(self, buffer: WeightedRolloutBuffer, behaviour_dists: list, truncated: list, last_obs, dones):
        """The fp32 policy over the whole rollout: values, log π, GAE, correction weights, diagnostics."""
        n_steps, n_envs = buffer.buffer_size, buffer.n_envs
        observations = buffer.observations.reshape(n_steps * n_envs, *buffer.obs_shape)
        actions = th.as_tensor(buffer.actions.reshape(n_steps * n_envs, -1), device=self.device)
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        values: list[th.Tensor] = []
        log_p: list[th.Tensor] = []
        fp32_dists: list[Distribution] = []
        with th.no_grad():
            for start in range(0, len(observations), LEARNER_CHUNK):
                chunk = obs_as_tensor(observations[start : start + LEARNER_CHUNK], self.device)
                dist = self.policy.get_distribution(chunk)
                log_p.append(dist.log_prob(actions[start : start + LEARNER_CHUNK]))
                fp32_dists.append(torch_distribution(dist))
                values.append(self.policy.predict_values(chunk).flatten())
            for step, idx, terminal in truncated:
                terminal_value = self.policy.predict_values(self.policy.obs_to_tensor(terminal)[0])[0]
                buffer.rewards[step, idx] += self.gamma * float(terminal_value)
            last_values = self.policy.predict_values(obs_as_tensor(last_obs, self.device))
        log_p_all = th.cat(log_p)
        log_q_all = th.as_tensor(buffer.log_probs.reshape(-1), device=self.device)
        buffer.values = th.cat(values).cpu().numpy().reshape(n_steps, n_envs)
        buffer.behaviour_log_probs = buffer.log_probs.copy()
        if self.correction != "none":  # PPO's ratio against the fp32 policy that the behaviour copy stood in for
            buffer.log_probs = log_p_all.cpu().numpy().reshape(n_steps, n_envs)
        weights = correction_weights(log_p_all, log_q_all, self.correction, self.cap)
        buffer.weights = weights.cpu().numpy().astype(np.float32).reshape(n_steps, n_envs)
        buffer.compute_returns_and_advantage(last_values=last_values, dones=dones)
        space = self.action_space
        stats = mismatch_stats(
            concat_distributions(fp32_dists),
            concat_distributions(behaviour_dists),
            log_p_all,
            log_q_all,
            self.cap,
            space.low if isinstance(space, spaces.Box) else None,
            space.high if isinstance(space, spaces.Box) else None,
        )
        self.rollout_log.append(
            {
                "timesteps": self.num_timesteps,
                "seconds": time.perf_counter() - self._clock["start"],
                "reward": safe_mean([info["r"] for info in self.ep_info_buffer]) if self.ep_info_buffer else None,
                "weight_mean": float(weights.mean()),
                **stats,
            }
        )

    def train(self) -> None:
        started = time.perf_counter()
        self._weighted_train()
        refreshed = time.perf_counter()
        self.behaviour.refresh()
        self._clock["train"] += refreshed - started
        self._clock["requantize"] += time.perf_counter() - refreshed

    def _weighted_train(self) -> None:
        raise NotImplementedError

    def timings(self) -> dict[str, float]:
        """Seconds spent acting, in the learner's re-read, in gradient updates and re-quantizing, since the switch."""
        return {name: seconds for name, seconds in self._clock.items() if name != "start"}


class RolloutPPO(QuantizedRollouts, PPO):
    """SB3's PPO trained on quantized rollouts."""

    def _weighted_train(self) -> None:
        """SB3's ``PPO.train`` with each sample's policy-gradient term multiplied by its correction weight."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        schedule, value_schedule = self.clip_range, self.clip_range_vf
        assert callable(schedule)  # PPO's _setup_model made the clip ranges schedules
        clip_range = schedule(self._current_progress_remaining)
        clip_range_vf = None
        if value_schedule is not None:
            assert callable(value_schedule)
            clip_range_vf = value_schedule(self._current_progress_remaining)
        entropy_losses, pg_losses, value_losses, clip_fractions = [], [], [], []
        continue_training = True
        loss = th.zeros(())
        approx_kl_divs: list[Any] = []
        for _ in range(self.n_epochs):
            approx_kl_divs = []
            for rollout_data in self.weighted_batches(self.batch_size):
                actions = rollout_data.actions
                if isinstance(self.action_space, spaces.Discrete):
                    actions = rollout_data.actions.long().flatten()
                values, log_prob, entropy = self.policy.evaluate_actions(rollout_data.observations, actions)
                values = values.flatten()
                advantages = rollout_data.advantages
                if self.normalize_advantage and len(advantages) > 1:
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                ratio = th.exp(log_prob - rollout_data.old_log_prob)
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range)
                policy_loss = -(rollout_data.weights * th.min(policy_loss_1, policy_loss_2)).mean()
                pg_losses.append(policy_loss.item())
                clip_fractions.append(th.mean((th.abs(ratio - 1) > clip_range).float()).item())
                if clip_range_vf is None:
                    values_pred = values
                else:
                    values_pred = rollout_data.old_values + th.clamp(
                        values - rollout_data.old_values, -clip_range_vf, clip_range_vf
                    )
                value_loss = F.mse_loss(rollout_data.returns, values_pred)
                value_losses.append(value_loss.item())
                entropy_loss = -th.mean(-log_prob) if entropy is None else -th.mean(entropy)
                entropy_losses.append(entropy_loss.item())
                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
                with th.no_grad():
                    log_ratio = log_prob - rollout_data.old_log_prob
                    approx_kl_div = th.mean((th.exp(log_ratio) - 1) - log_ratio).cpu().numpy()
                    approx_kl_divs.append(approx_kl_div)
                if self.target_kl is not None and approx_kl_div > 1.5 * self.target_kl:
                    continue_training = False
                    break
                self.policy.optimizer.zero_grad()
                loss.backward()
                th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += 1
            if not continue_training:
                break
        explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())
        self.logger.record("train/entropy_loss", np.mean(entropy_losses))
        self.logger.record("train/policy_gradient_loss", np.mean(pg_losses))
        self.logger.record("train/value_loss", np.mean(value_losses))
        self.logger.record("train/approx_kl", np.mean(approx_kl_divs))
        self.logger.record("train/clip_fraction", np.mean(clip_fractions))
        self.logger.record("train/loss", loss.item())
        self.logger.record("train/explained_variance", explained_var)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")


class RolloutA2C(QuantizedRollouts, A2C):
    """SB3's A2C trained on quantized rollouts (one gradient step per rollout, so π is still the policy that the
    behaviour copy was made from: ``tis``/``mis`` weight the log-likelihood term by π/π_q)."""

    def _weighted_train(self) -> None:
        """SB3's ``A2C.train`` with each sample's policy-gradient term multiplied by its correction weight."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        for rollout_data in self.weighted_batches(None):
            actions = rollout_data.actions
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.long().flatten()
            values, log_prob, entropy = self.policy.evaluate_actions(rollout_data.observations, actions)
            values = values.flatten()
            advantages = rollout_data.advantages
            if self.normalize_advantage:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            policy_loss = -(rollout_data.weights * advantages * log_prob).mean()
            value_loss = F.mse_loss(rollout_data.returns, values)
            entropy_loss = -th.mean(-log_prob) if entropy is None else -th.mean(entropy)
            loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
            self.policy.optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
            self.policy.optimizer.step()
        explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())
        self._n_updates += 1
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/explained_variance", explained_var)
        self.logger.record("train/entropy_loss", entropy_loss.item())
        self.logger.record("train/policy_loss", policy_loss.item())
        self.logger.record("train/value_loss", value_loss.item())
