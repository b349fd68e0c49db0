"""A reach task that reports what robot envs report: the agent moves a point along a line toward a target; it
succeeds (``info["is_success"]``, every step, as gymnasium-robotics and panda-gym do) when within 0.05 of it, and
each step closer than 0.2 to a wall costs 1 (``info["cost"]``, as safety-gymnasium does). Episodes start from the
env's own generator, so seeded episodes replay. Importing this module registers ReachLine-v0 and its Box-action twin
ReachLineContinuous-v0."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces

STEP, REACHED, WALL, STEPS = 0.1, 0.05, 0.8, 40


class ReachLine(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)  # (position, target)
    action_space = spaces.Discrete(3)  # left, stay, right

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.target = self.np_random.uniform(-0.9, 0.9, 2)
        return self._observation(), {"is_success": False, "cost": 0.0}

    def _observation(self) -> np.ndarray:
        return np.array([self.position, self.target], dtype=np.float32)

    def step(self, action):
        return self._moved(int(action) - 1)

    def _moved(self, push: float):
        self.position = float(np.clip(self.position + STEP * push, -1.0, 1.0))
        distance = abs(self.position - self.target)
        reached = distance < REACHED
        info = {"is_success": reached, "cost": float(abs(self.position) > WALL)}
        return self._observation(), -distance, reached, False, info


if "ReachLine-v0" not in gym.registry:
    gym.register("ReachLine-v0", entry_point=ReachLine, max_episode_steps=STEPS)


class ReachLineContinuous(ReachLine):
    """The same reach with a continuous push in [-1, 1] (one step moves ``STEP * push``): a Box action, as arms have."""

    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def step(self, action):
        return self._moved(float(np.clip(np.asarray(action, dtype=float).reshape(-1)[0], -1.0, 1.0)))


if "ReachLineContinuous-v0" not in gym.registry:
    gym.register("ReachLineContinuous-v0", entry_point=ReachLineContinuous, max_episode_steps=STEPS)
