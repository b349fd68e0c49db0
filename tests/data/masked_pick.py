"""An env whose masks forbid actions: each step shows six values and forbids three of the actions (never all the
best ones); playing action a earns value[a] when it is legal and -1 when it is not. A policy that ignores the mask
picks the largest value, illegal about half the time. Its masks follow sb3-contrib's convention (``action_masks()``),
and everything is drawn from the env's own generator, so seeded episodes replay. Importing this module registers
MaskedPick-v0."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ACTIONS, FORBIDDEN, STEPS = 6, 3, 20


class MaskedPick(gym.Env):
    observation_space = spaces.Box(0.0, 1.0, (ACTIONS,), np.float32)
    action_space = spaces.Discrete(ACTIONS)

    played = illegal_played = 0  # across episodes: a test checks the second stays 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self._draw(), {}

    def _draw(self) -> np.ndarray:
        self.values = self.np_random.uniform(0.0, 1.0, ACTIONS).astype(np.float32)
        self.legal = np.ones(ACTIONS, dtype=bool)
        self.legal[self.np_random.choice(ACTIONS, FORBIDDEN, replace=False)] = False
        return self.values.copy()

    def action_masks(self) -> np.ndarray:
        return self.legal.copy()

    def step(self, action):
        reward = float(self.values[action]) if self.legal[action] else -1.0
        self.played += 1
        self.illegal_played += int(not self.legal[action])
        self.steps += 1
        return self._draw(), reward, False, self.steps >= STEPS, {}


if "MaskedPick-v0" not in gym.registry:
    gym.register("MaskedPick-v0", entry_point=MaskedPick)
