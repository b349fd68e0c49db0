"""The uniform-random policy on an agent's envs: the 0 of normalised scores, measured rather than assumed."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from quarl_bench.action_modes import ActionMode
from quarl_bench.methods.playing import job_result, play_job
from quarl_bench.methods.protocol import register_evaluator
from quarl_bench.types import EvalResult, Job
from quarl_bench.zoo.agents import LoadedAgent


class RandomActions:
    """Acts like an SB3 policy's ``predict``, drawing every env's action from the action space (which
    :func:`~quarl_bench.evaluation.evaluate.evaluate` seeds)."""

    def __init__(self, action_space) -> None:
        self.action_space = action_space

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        if episode_start is not None:
            n_envs = len(episode_start)
        else:  # a Dict observation's rows are its keys' (len of the dict is its number of keys)
            n_envs = len(next(iter(observation.values())) if isinstance(observation, dict) else observation)
        return np.stack([self.action_space.sample() for _ in range(n_envs)]), state

    def decision_values(self, observation: np.ndarray) -> np.ndarray:
        """Independent uniform scores per action (its seeded generator's): their argmax over the legal actions is a
        uniform legal action, which is how it acts on an env that masks actions."""
        return self.action_space.np_random.random((len(observation), int(self.action_space.n)))


@register_evaluator("random")
def evaluate_job(agent: LoadedAgent, job: Job, driver: dict[str, Any], eval_workers: int = 1) -> EvalResult:
    """Play ``job``'s episodes with uniformly random actions on the agent's envs (same wrappers and seeds)."""
    actions = RandomActions(copy.deepcopy(agent.model.policy.action_space))  # seeded by the evaluation
    episodes = play_job(agent, job, actions, actions=ActionMode("deterministic"))
    return job_result(agent, job, episodes, driver)
