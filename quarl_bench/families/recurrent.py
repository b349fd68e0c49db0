"""Recurrent policies (sb3-contrib's ``RecurrentActorCriticPolicy``, rl-zoo3's ``ppo_lstm``): the actor's LSTM
state, carried step to step as sb3-contrib's ``predict(state=..., episode_start=...)`` carries it.

A recurrent policy acts on more than its observation: what it does depends on its state. So where quarl-bench
keeps *states a policy acts on* (calibration sets), a recurrent policy's are **Markov states**: the observation
followed by the actor's hidden and cell state (``[obs | h | c]``, flattened per env), the state as it was when the
policy acted (zeroed at an episode's start). :func:`act_on` replays a policy on them exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

State = tuple[np.ndarray, np.ndarray]  # (h, c), each (layers, envs, hidden): sb3-contrib's predict state


def is_recurrent(policy: object) -> TypeGuard[RecurrentActorCriticPolicy]:
    """Whether ``policy`` carries an LSTM state between steps."""
    from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

    return isinstance(policy, RecurrentActorCriticPolicy)


def actor_lstm(policy: RecurrentActorCriticPolicy) -> nn.LSTM:
    """The LSTM the actor acts through (shared with the critic when ``shared_lstm``)."""
    return policy.lstm_actor


def constructor_parameters(policy: nn.Module) -> dict[str, Any]:
    """What sb3-contrib's ``_get_constructor_parameters`` leaves out of a recurrent policy (its LSTM's size and
    sharing), read from the policy; nothing for other policies."""
    if not is_recurrent(policy):
        return {}
    lstm = actor_lstm(policy)
    return {
        "lstm_hidden_size": lstm.hidden_size,
        "n_lstm_layers": lstm.num_layers,
        "shared_lstm": policy.shared_lstm,
        "enable_critic_lstm": policy.lstm_critic is not None,
    }


def state_shape(policy: RecurrentActorCriticPolicy) -> tuple[int, int]:
    """(layers, hidden size) of the actor's state."""
    lstm = actor_lstm(policy)
    return lstm.num_layers, lstm.hidden_size


def zero_state(policy: RecurrentActorCriticPolicy, envs: int) -> State:
    layers, hidden = state_shape(policy)
    zeros = np.zeros((layers, envs, hidden), dtype=np.float32)
    return zeros, zeros.copy()


def started(state: State, episode_start: np.ndarray | None) -> State:
    """The state the policy really acts from: zero for envs whose episode starts (what sb3-contrib does inside)."""
    if episode_start is None:
        return state
    keep = (1.0 - np.asarray(episode_start, dtype=np.float32))[None, :, None]
    return state[0] * keep, state[1] * keep


def pack(observations: np.ndarray, state: State) -> np.ndarray:
    """Markov states ``[obs | h | c]``, one row per env."""
    envs = len(observations)
    flat = [np.asarray(observations, dtype=np.float32).reshape(envs, -1)]
    flat += [np.asarray(part, dtype=np.float32).transpose(1, 0, 2).reshape(envs, -1) for part in state]
    return np.concatenate(flat, axis=1)


def unpack(policy: RecurrentActorCriticPolicy, markov: np.ndarray) -> tuple[np.ndarray, State]:
    """The observations and the state of Markov states from :func:`pack`."""
    observations, state = split(markov, *state_shape(policy))
    return observations.reshape(len(markov), *(policy.observation_space.shape or ())), state


def split(markov: np.ndarray, layers: int, hidden: int) -> tuple[np.ndarray, State]:
    """Markov states from :func:`pack` as flat observations and the state, given the state's shape."""
    rows, width = len(markov), layers * hidden

    def part(block: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(block.reshape(rows, layers, hidden).transpose(1, 0, 2))

    return markov[:, : -2 * width], (part(markov[:, -2 * width : -width]), part(markov[:, -width:]))


def act_on(policy: RecurrentActorCriticPolicy, markov: np.ndarray, deterministic: bool = True) -> np.ndarray:
    """The policy's actions on Markov states (each row from its own state, no episode start)."""
    observations, state = unpack(policy, markov)
    actions, _ = policy.predict(
        observations, state=state, episode_start=np.zeros(len(markov), dtype=bool), deterministic=deterministic
    )
    return actions


def distribution_step(
    policy: RecurrentActorCriticPolicy, observation: np.ndarray, state: State, episode_start: np.ndarray | None
) -> tuple[Any, State]:
    """SB3's action distribution for a batch (its ``.distribution``: torch's Categorical or Normal) and the next
    state (torch, no grad): what ``predict`` computes."""
    tensor, _ = policy.obs_to_tensor(observation)
    assert isinstance(tensor, torch.Tensor)  # a recurrent policy's observations are one array (sb3-contrib's too)
    device = policy.device
    envs = tensor.shape[0]
    starts = np.zeros(envs, dtype=bool) if episode_start is None else np.asarray(episode_start)
    with torch.no_grad():
        states = (
            torch.as_tensor(state[0], dtype=torch.float32, device=device),
            torch.as_tensor(state[1], dtype=torch.float32, device=device),
        )
        distribution, (h, c) = policy.get_distribution(
            tensor, states, torch.as_tensor(starts, dtype=torch.float32, device=device)
        )
    return distribution, (h.cpu().numpy(), c.cpu().numpy())


class StatefulGreedy:
    """A recurrent policy's deterministic actions along a trajectory it does not choose (the evaluated policy's):
    its own state carried from call to call, reset where an episode starts. Call it with every env each step."""

    def __init__(self, policy: RecurrentActorCriticPolicy) -> None:
        self.policy = policy
        self.state: tuple[np.ndarray, ...] | None = None  # predict's state: (h, c)

    def __call__(self, observation: np.ndarray, episode_start: np.ndarray | None = None) -> np.ndarray:
        actions, self.state = self.policy.predict(
            observation, state=self.state, episode_start=episode_start, deterministic=True
        )
        return np.asarray(actions)
