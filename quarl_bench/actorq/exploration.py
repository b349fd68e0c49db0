"""Per-actor exploration as in the ActorQ paper: an epsilon-greedy spread for DQN (Ape-X's schedule) and Gaussian
action noise with sigma spread over 0-0.2 for the deterministic continuous learners."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

MAX_SIGMA = 0.2


def epsilons(n_actors: int, base: float = 0.4, alpha: float = 7.0) -> list[float]:
    """Ape-X's exploration spread over actors: eps_i = base ** (1 + alpha * i / (N - 1))."""
    if n_actors == 1:
        return [base]
    return [base ** (1 + alpha * i / (n_actors - 1)) for i in range(n_actors)]


def sigmas(n_actors: int) -> list[float]:
    """Gaussian noise scales (in the squashed [-1, 1] action space) spread evenly over 0..0.2; one actor gets 0.1."""
    if n_actors == 1:
        return [MAX_SIGMA / 2]
    return [float(s) for s in np.linspace(0.0, MAX_SIGMA, n_actors)]


def exploration_levels(action_space: spaces.Space, n_actors: int) -> list[float]:
    return epsilons(n_actors) if isinstance(action_space, spaces.Discrete) else sigmas(n_actors)


def explore(output: np.ndarray, action_space: spaces.Space, level: float, rng: np.random.Generator):
    """The env action and the action the replay buffer stores, from the network's output.

    Discrete: epsilon-greedy over Q-values (both the same int). Continuous: the squashed action plus
    N(0, level) noise, clipped to [-1, 1] for the buffer (SB3's TD3/DDPG train on squashed actions) and
    rescaled to the env's bounds for the env.
    """
    if isinstance(action_space, spaces.Discrete):
        action = int(rng.integers(action_space.n)) if rng.random() < level else int(np.argmax(output))
        return action, action
    assert isinstance(action_space, spaces.Box)  # ActorQ's action spaces are Discrete or Box (config checks)
    squashed = np.clip(output + rng.normal(0.0, level, size=output.shape), -1.0, 1.0).astype(np.float32)
    low, high = action_space.low, action_space.high
    return low + 0.5 * (squashed + 1.0) * (high - low), squashed
