"""A ten-step env whose reward per step is an env kwarg: the return (10 x reward_per_step) shows which kwargs the
env was made with. Importing this module registers FlagEnv-v0."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class FlagEnv(gym.Env):
    def __init__(self, reward_per_step: float = 1.0) -> None:
        self.reward_per_step = reward_per_step
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action):
        self.steps += 1
        obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        return obs, float(self.reward_per_step), False, self.steps >= 10, {}


if "FlagEnv-v0" not in gym.registry:
    gym.register("FlagEnv-v0", entry_point=FlagEnv)
