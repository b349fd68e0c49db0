"""Playing under a condition (``--perturb``): the wrapper that puts a condition's registered kinds
(:mod:`quarl_bench.perturbations`, one module per kind: sensor noise, actuator noise, delayed and sticky actions,
wider starts, dynamics a robot will meet) on an agent's envs, and the checks that name what an env accepts.

Every episode draws its perturbation from its own generator, seeded by (job seed, env index, episode number): the
fp32 and the quantized policy meet the same noise and the same dynamics on the same paired episode, whatever
either did in the episodes before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from quarl_bench.errors import QuarlError
from quarl_bench.perturbations import (
    PERTURBATIONS,
    STREAM,
    Perturbation,
    accepted_by,
    parse_perturbation,
)
from quarl_bench.perturbations.dynamics import is_mujoco
from quarl_bench.perturbations.initial_spread import wider_start_options

__all__ = [
    "STREAM",
    "Perturbation",
    "PerturbedEnv",
    "condition_for",
    "condition_grid",
    "is_mujoco",
    "named_condition",
    "parse_perturbation",
    "perturbed_envs",
    "wider_start_options",
]


def named_condition(text: str) -> str:
    """``text``, or the condition it names in ``zoo_configs/perturbations.yaml`` (``sensor-noise``).

    :raises QuarlError: for a bare word that names none, listing the names.
    """
    if not text or "=" in text or "~" in text:
        return text
    import yaml

    from quarl_bench.config import config_dir

    named = yaml.safe_load((config_dir() / "perturbations.yaml").read_text()) or {}
    if text not in named:
        raise QuarlError(
            f"bad perturbation {text!r}: expected NAME=SEVERITY,... or a named condition ({', '.join(named)})"
        )
    return str(named[text])


def condition_grid(text: str) -> list[str]:
    """The conditions a severity grid spells (``obs-noise=0.05/0.1/0.2``: one per severity; several names with
    several severities: every combination), each as :func:`parse_perturbation` reads it; ``[""]`` for none. A name
    from ``zoo_configs/perturbations.yaml`` stands for its condition."""
    import itertools

    text = named_condition(text.strip())
    options = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, equals, values = part.partition("=")
        options.append([f"{name}={value}" for value in values.split("/")] if equals else [part])
    return [",".join(combination) for combination in itertools.product(*options)] or [""]


def check_condition(perturbation: Perturbation, env_id: str) -> None:
    """:raises QuarlError: naming a kind ``env_id`` does not accept (a dynamics parameter it does not have, a start
    it cannot widen, noise on observations it cannot scale), and the kinds it does accept."""
    for name in perturbation.names:
        kind = PERTURBATIONS.get(name)
        if not kind.accepts(env_id):
            raise QuarlError(
                f"bad perturbation {name!r} for {env_id}: {kind.why_not}; it accepts {', '.join(accepted_by(env_id))}"
            )


def condition_for(text: str, env_id: str) -> str:
    """The canonical spelling of ``text`` for ``env_id`` ('' for none).

    :raises QuarlError: in one line, for a bad name or severity, or a kind the env does not accept.
    """
    condition = parse_perturbation(named_condition(text.strip()))
    check_condition(condition, env_id)
    return condition.text


class PerturbedEnv(VecEnvWrapper):
    """The agent's envs under one condition, each episode's perturbation drawn from its own generator; each
    registered kind the condition uses is applied at the step it touches (its ``order`` among the others)."""

    def __init__(self, venv: VecEnv, perturbation: Perturbation, seed: int, obs_scale: np.ndarray | None) -> None:
        super().__init__(venv)
        self.perturbation, self.base_seed, self.obs_scale = perturbation, seed, obs_scale
        self.acting = perturbation.touching("action")
        self.observing = perturbation.touching("observation")
        self.dynamics = sorted(perturbation.touching("dynamics"), key=lambda kind: kind.name)
        self.episode = np.zeros(self.num_envs, dtype=int)
        self.rngs = [self._generator(i) for i in range(self.num_envs)]
        self.memory: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self.bases = _base_envs(venv)
        self.nominal = [{kind.name: kind.read(env) for kind in self.dynamics if kind.read} for env in self.bases]
        self.current: list[dict[str, float]] = [dict(perturbation.severities) for _ in range(self.num_envs)]
        for kind in perturbation.touching("reset"):
            if kind.wrap is not None and perturbation.get(kind.name):
                for env in self.bases:
                    kind.wrap(env, perturbation.get(kind.name))

    def _generator(self, index: int) -> np.random.Generator:
        return np.random.default_rng([self.base_seed, STREAM, index, int(self.episode[index])])

    def _start_episode(self, index: int) -> None:
        self.rngs[index] = self._generator(index)
        self.memory[index] = {}
        env, rng = self.bases[index], self.rngs[index]
        self.current[index] = severity = self.perturbation.drawn(rng)
        for kind in self.dynamics:
            spread = severity.get(kind.name, 0.0)
            assert kind.write is not None
            kind.write(env, self.nominal[index][kind.name] * rng.uniform(1 - spread, 1 + spread))

    def reset(self) -> Any:
        self.episode[:] = 0
        for index in range(self.num_envs):
            self._start_episode(index)
        return self._observed(self.venv.reset())

    def step_async(self, actions: np.ndarray) -> None:
        played = np.array(actions, copy=True)
        for index in range(self.num_envs):
            played[index] = self._acted(index, played[index])
        self.venv.step_async(played)

    def _acted(self, index: int, action: Any) -> Any:
        # a copy: a Box action is a row of the batch the env is sent, which this step overwrites with what it plays
        action = np.array(action, copy=True)
        rng, severity, memory = self.rngs[index], self.current[index], self.memory[index]
        for kind in self.acting:
            assert kind.act is not None
            action = kind.act(action, severity.get(kind.name, 0.0), memory, rng, self.action_space)
        return action

    def step_wait(self) -> Any:
        observations, rewards, dones, infos = self.venv.step_wait()
        for index in np.flatnonzero(dones):
            self.episode[index] += 1
            self._start_episode(int(index))
        return self._observed(observations), rewards, dones, infos

    def _observed(self, observations: Any) -> Any:
        kinds = [kind for kind in self.observing if self.obs_scale is not None or not kind.scaled]
        if not kinds:
            return observations
        if isinstance(observations, dict):  # a goal-conditioned env: each key's rows on their own (unscaled kinds)
            return {key: self._rows(np.asarray(value), kinds, key) for key, value in observations.items()}
        return self._rows(np.array(observations, dtype=np.float32, copy=True), kinds, "")

    def _rows(self, seen: np.ndarray, kinds: list, key: str) -> np.ndarray:
        seen = np.array(seen, copy=True)
        for index in range(self.num_envs):
            memory = self.memory[index].setdefault(f"observation {key}", {}) if key else self.memory[index]
            for kind in kinds:
                assert kind.observe is not None
                severity = self.current[index].get(kind.name, 0.0)
                seen[index] = kind.observe(seen[index], severity, memory, self.rngs[index], self.obs_scale)
        return seen


def _base_envs(venv: VecEnv) -> list[Any]:
    """The unwrapped gymnasium envs inside ``venv`` (a DummyVecEnv under any VecEnv wrappers)."""
    inner: Any = venv
    while hasattr(inner, "venv"):
        inner = inner.venv
    return [env.unwrapped for env in getattr(inner, "envs", [])]


def perturbed_envs(
    make_env: Callable[[int, int], VecEnv], perturbation: Perturbation, obs_scale: np.ndarray | None
) -> Callable[[int, int], VecEnv]:
    """``make_env`` whose envs play under ``perturbation``."""

    def make(n_envs: int, seed: int) -> VecEnv:
        return PerturbedEnv(make_env(n_envs, seed), perturbation, seed, obs_scale)

    return make
