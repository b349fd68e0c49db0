"""A user's function that judges each finished episode (``--success FILE.py:FN``, ``--progress FILE.py:FN``, or
``package.module:FN``): called with an :class:`Episode`, its value becomes the episode's ``success`` (truthy) or
``progress`` (a share in [0, 1]), recorded as if the env had put it in its info.

The judge is part of every played job's identity (``Job.judge``: ``success=FILE.py:FN``), so rows judged by
different functions never pair, and a stored row names the function that judged it (its ``judge`` column).
"""

from __future__ import annotations

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

JUDGED = {"success": "is_success", "progress": "progress"}  # the outcome a judge decides -> the info key it fills


@dataclass(frozen=True)
class Episode:
    """What a judge is shown of one finished episode: its return and length, whether it ended on its own (not a
    time limit), and the last step's info (SB3 puts the final observation there, ``terminal_observation``)."""

    return_: float
    length: int
    terminated: bool
    info: dict[str, Any]

    @property
    def final_observation(self) -> Any:
        return self.info.get("terminal_observation")


def is_function_rule(rule: str) -> bool:
    """Whether a ``--success`` / ``--progress`` rule names a function (``FILE.py:FN`` or ``module:FN``)."""
    return ":" in rule


def judge_text(outcome: str, rule: str) -> str:
    """A job's ``judge`` field for ``outcome`` decided by ``rule`` ('' where the rule is no function)."""
    return f"{outcome}={rule}" if is_function_rule(rule) else ""


def load_judge(rule: str, flag: str = "--success") -> Callable[[Episode], Any]:
    """The function ``rule`` names: ``FILE.py:FN`` (a file) or ``package.module:FN`` (importable).

    :raises QuarlError: in one line, for a file, module or function that is not there.
    """
    target, _, name = rule.rpartition(":")
    if not target or not name:
        raise QuarlError(f"bad {flag} {rule!r}: expected FILE.py:FUNCTION or package.module:FUNCTION")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise QuarlError(f"bad {flag} {rule!r}: no file {target!r}; expected FILE.py:FUNCTION")
        module_name = f"quarl_user_judge_{abs(hash(str(path.resolve())))}"
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
        self.returns = np.zeros(self.num_envs)
        self.lengths = np.zeros(self.num_envs, dtype=int)

    def reset(self) -> Any:
        self.returns[:], self.lengths[:] = 0.0, 0
        return self.venv.reset()

    def step_wait(self) -> Any:
        observations, rewards, dones, infos = self.venv.step_wait()
        self.returns += rewards
        self.lengths += 1
        for index in np.flatnonzero(dones):
            info = infos[index]
            episode = Episode(
                float(self.returns[index]),
                int(self.lengths[index]),
                not info.get("TimeLimit.truncated", False),
                info,
            )
            info[self.key] = self._judged(episode)
            self.returns[index], self.lengths[index] = 0.0, 0
        return observations, rewards, dones, infos

    def _judged(self, episode: Episode) -> float:
        value = self.function(episode)
        if self.outcome == "success":
            return float(bool(value))
        progress = float(value)
        if not 0.0 <= progress <= 1.0:
            raise QuarlError(
                f"the --progress function returned {progress:g} for an episode: expected a share in [0, 1]"
            )
        return progress


def judged_envs(make_env: Callable[[int, int], VecEnv], judge: str) -> Callable[[int, int], VecEnv]:
    """``make_env`` whose finished episodes ``judge`` (``success=FILE.py:FN``) decides."""

    def make(n_envs: int, seed: int) -> VecEnv:
        return JudgedEnv(make_env(n_envs, seed), judge)

    return make
