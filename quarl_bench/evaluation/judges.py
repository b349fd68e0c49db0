"""A user's function that judges each finished episode (``--success FILE.py:FN``, ``--progress FILE.py:FN``, or
``package.module:FN``): called with an :class:`Episode`, its value becomes the episode's ``success`` (truthy) or
``progress`` (a share in [0, 1]), recorded as if the env had put it in its info.

The judge is part of every played job's identity (``Job.judge``: ``success=FILE.py:FN@SOURCE``, the rule with a
hash of its source file), so rows judged by different functions, or by one function edited, never pair, and a
stored row names the function (and the source) that judged it (its ``judge`` column). A judge sees the raw
observation (``final_observation``) and, where the agent normalises its observations, the normalised one it acted
on (``normalized_final_observation``); what it prints reaches the console.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.judge_identity import is_function_rule, plain_rule, rule_identity, source_hash

JUDGED = {"success": "is_success", "progress": "progress"}  # the outcome a judge decides -> the info key it fills


@dataclass(frozen=True)
class Trajectory:
    """Every step of one finished episode, in order: what the policy was shown (``observations``: normalised where
    the agent normalises; ``raw_observations``: the env's own units), the actions it sent, each step's reward and
    info. ``observations[t]`` is what ``actions[t]`` answered; the final observation is the episode's own."""

    observations: list[Any]
    raw_observations: list[Any]
    actions: list[Any]
    rewards: list[float]
    infos: list[dict[str, Any]]

    def first_success(self) -> int | None:
        """The step (1-based) whose info first reports ``is_success``, or None."""
        return next((t + 1 for t, info in enumerate(self.infos) if info.get("is_success")), None)


@dataclass(frozen=True)
class Episode:
    """What a judge is shown of one finished episode: its return and length, whether it ended on its own (not a
    time limit), the last step's info, its final observation as the env gave it (``final_observation``, raw
    units) and as the policy saw it (``normalized_final_observation``: after the agent's VecNormalize; the raw one
    where it has none), and its whole ``trajectory`` (:class:`Trajectory`: observations raw and normalised, actions,
    rewards, infos)."""

    return_: float
    length: int
    terminated: bool
    info: dict[str, Any]
    raw_final_observation: Any = None
    trajectory: Trajectory | None = None

    @property
    def final_observation(self) -> Any:
        """The env's own final observation (physical units), before any normalisation."""
        if self.raw_final_observation is not None:
            return self.raw_final_observation
        return self.info.get("terminal_observation")

    @property
    def normalized_final_observation(self) -> Any:
        """The final observation as the policy saw it (normalised where the agent normalises)."""
        return self.info.get("terminal_observation")


def judge_text(outcome: str, rule: str) -> str:
    """A job's ``judge`` field for ``outcome`` decided by ``rule`` ('' where the rule is no function): the rule and
    its source's hash (:func:`rule_identity`), so an edited judge is a new question."""
    return f"{outcome}={rule_identity(rule)}" if is_function_rule(rule) else ""


def load_judge(rule: str, flag: str = "--success") -> Callable[[Episode], Any]:
    """The function ``rule`` names: ``FILE.py:FN`` (a file) or ``package.module:FN`` (importable).

    :raises QuarlError: in one line, for a file, module or function that is not there, or a source that changed
        since its hash was taken (a job planned on the old rule is never judged by the new one).
    """
    rule, expected = plain_rule(rule)
    if expected and source_hash(rule, flag) != expected:
        raise QuarlError(
            f"bad {flag} {rule!r}: its source changed since the job was planned (hash {expected}); run the command "
            "again to judge with the new rule"
        )
    target, _, name = rule.rpartition(":")
    if not target or not name:
        raise QuarlError(f"bad {flag} {rule!r}: expected FILE.py:FUNCTION or package.module:FUNCTION")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise QuarlError(f"bad {flag} {rule!r}: no file {target!r}; expected FILE.py:FUNCTION")
        # the source's hash names the module: a file edited in one process is imported again
        module_name = f"quarl_user_judge_{abs(hash(str(path.resolve())))}_{source_hash(rule, flag)}"
        if module_name not in sys.modules:
            spec = importlib.util.spec_from_file_location(module_name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as error:  # the user's file raises any type
                raise QuarlError(f"bad {flag} {rule!r}: importing it raised {type(error).__name__}: {error}") from error
            sys.modules[module_name] = module
        module = sys.modules[module_name]
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as error:
            raise QuarlError(f"bad {flag} {rule!r}: cannot import {target!r} ({error})") from error
    function = getattr(module, name, None)
    if not callable(function):
        raise QuarlError(f"bad {flag} {rule!r}: {target} has no function {name!r}")
    return function


class JudgedEnv(VecEnvWrapper):
    """The agent's envs, each finished episode's info given the judge's value (``is_success`` or ``progress``)."""

    def __init__(self, venv: VecEnv, judge: str) -> None:
        super().__init__(venv)
        outcome, _, rule = judge.partition("=")
        self.key, self.outcome = JUDGED[outcome], outcome
        self.function = load_judge(rule, f"--{outcome}")
        self.normalizer = _normalizer(venv)
        self.returns = np.zeros(self.num_envs)
        self.lengths = np.zeros(self.num_envs, dtype=int)
        self.steps: list[dict[str, list[Any]]] = [_fresh() for _ in range(self.num_envs)]
        self.shown: Any = None  # the observations the policy answers next

    def reset(self) -> Any:
        self.returns[:], self.lengths[:] = 0.0, 0
        self.steps = [_fresh() for _ in range(self.num_envs)]
        self.shown = self.venv.reset()
        return self.shown

    def step_async(self, actions: np.ndarray) -> None:
        for index in range(self.num_envs):
            self.steps[index]["observations"].append(_row(self.shown, index))
            self.steps[index]["actions"].append(np.array(actions[index], copy=True))
        self.venv.step_async(actions)

    def step_wait(self) -> Any:
        observations, rewards, dones, infos = self.venv.step_wait()
        self.returns += rewards
        self.lengths += 1
        for steps, reward, info in zip(self.steps, rewards, infos, strict=True):
            steps["rewards"].append(float(reward))
            steps["infos"].append(dict(info))
        for index in np.flatnonzero(dones):
            info = infos[index]
            final = info.get("terminal_observation")
            raw = self._raw(final) if final is not None else None
            steps = self.steps[index]
            trajectory = Trajectory(
                steps["observations"],
                [self._raw(o) for o in steps["observations"]],
                steps["actions"],
                steps["rewards"],
                steps["infos"],
            )
            episode = Episode(
                float(self.returns[index]),
                int(self.lengths[index]),
                not info.get("TimeLimit.truncated", False),
                info,
                raw if self.normalizer is not None else None,
                trajectory,
            )
            info[self.key] = self._judged(episode)
            self.returns[index], self.lengths[index] = 0.0, 0
            self.steps[index] = _fresh()
        self.shown = observations
        return observations, rewards, dones, infos

    def _raw(self, observation: Any) -> Any:
        return self.normalizer.unnormalize_obs(observation) if self.normalizer is not None else observation

    def _judged(self, episode: Episode) -> float:
        from quarl_bench.errors import terminal_stderr

        # inside an evaluation's silenced block, the judge's own prints still reach the console
        with contextlib.redirect_stdout(terminal_stderr[-1]) if terminal_stderr else contextlib.nullcontext():
            value = self.function(episode)
        if self.outcome == "success":
            return float(bool(value))
        progress = float(value)
        if not 0.0 <= progress <= 1.0:
            raise QuarlError(
                f"the --progress function returned {progress:g} for an episode: expected a share in [0, 1]"
            )
        return progress


def _fresh() -> dict[str, list[Any]]:
    return {"observations": [], "actions": [], "rewards": [], "infos": []}


def _row(observations: Any, index: int) -> Any:
    """One env's row of a batch of observations (a Dict observation's, key by key)."""
    if isinstance(observations, dict):
        return {key: np.array(value[index], copy=True) for key, value in observations.items()}
    return np.array(observations[index], copy=True)


def _normalizer(venv: VecEnv) -> Any:
    """The agent's VecNormalize below the judge, whose observations are normalised (None: none)."""
    from stable_baselines3.common.vec_env import VecNormalize

    inner: Any = venv
    while inner is not None:
        if isinstance(inner, VecNormalize) and inner.norm_obs:
            return inner
        inner = getattr(inner, "venv", None)
    return None


def judged_envs(make_env: Callable[[int, int], VecEnv], judge: str) -> Callable[[int, int], VecEnv]:
    """``make_env`` whose finished episodes ``judge`` (``success=FILE.py:FN``) decides."""

    def make(n_envs: int, seed: int) -> VecEnv:
        return JudgedEnv(make_env(n_envs, seed), judge)

    return make
