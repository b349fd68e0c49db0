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
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize

from quarl_bench.errors import QuarlError
from quarl_bench.observation_layout import ObservationLayout, layout_of
from quarl_bench.perturbations import (
    STREAM,
    Perturbation,
    Term,
    accepted_by,
    dimensions,
    kind_of,
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
    it cannot widen), and the kinds it does accept; or a target (``@key``, ``@i:j``) its observations do not have."""
    for name in perturbation.names:
        kind = kind_of(name)
        if not kind.accepts(env_id):
            raise QuarlError(
                f"bad perturbation {name!r} for {env_id}: {kind.why_not}; it accepts {', '.join(accepted_by(env_id))}"
            )
    targeted = [term for term in perturbation.terms("observation") if term.target]
    if targeted:
        space = observation_space_of(env_id)
        for term in targeted:
            _check_target(term, space, env_id)


def observation_space_of(env_id: str) -> Any:
    """The observation space of ``env_id`` (made once, closed)."""
    import gymnasium as gym

    from quarl_bench.zoo.envs import register_env_packages
    from quarl_bench.zoo.quiet import native_output_silenced

    register_env_packages()
    with native_output_silenced():  # pybullet envs print from C as they start
        env: Any = gym.make(env_id)
    try:
        return env.observation_space
    finally:
        env.close()


def _check_target(term: Term, space: Any, env_id: str) -> None:
    layout = layout_of(space)
    size = layout.size if layout is not None else int(np.prod(space.shape or (0,)))
    if dimensions(term.target, size) is not None:
        return
    if layout is None or term.target not in layout.names:
        keys = f"its keys are {', '.join(layout.names)}; " if layout is not None else ""
        raise QuarlError(
            f"bad perturbation target {term.name!r} for {env_id}: its observation has no key {term.target!r}; "
            f"{keys}expected @KEY or dimensions @i / @i:j below {size}"
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
    registered kind the condition uses is applied at the step it touches (its ``order`` among the others).

    Below the agent's VecNormalize (``raw_only``), it applies the ``raw`` observation kinds, which meet the
    observation in the env's own units, and :class:`PolicyObservations` applies the others above it, to what the
    policy sees, from this wrapper's generators (:func:`perturbed_envs` stacks both); with no VecNormalize it
    applies every kind itself."""

    def __init__(
        self,
        venv: VecEnv,
        perturbation: Perturbation,
        seed: int,
        obs_scale: np.ndarray | None,
        raw_only: bool = False,
    ) -> None:
        super().__init__(venv)
        self.perturbation, self.base_seed, self.obs_scale = perturbation, seed, obs_scale
        self.acting = perturbation.touching("action")
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
        terms = perturbation.terms("observation")
        self.observing = ObservationTerms(self, [term for term in terms if term.kind.raw or not raw_only])

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
        return self.observing(observations)


class ObservationTerms:
    """Observation terms of a condition applied to a batch, from the :class:`PerturbedEnv`'s generators and memory:
    each term to what it targets (a Dict key, Box dimensions, or all), a scaled kind with each dimension's spread
    (a Dict's flat, in its layout's order), an unscaled one to each key of a Dict on its own."""

    def __init__(self, owner: PerturbedEnv, terms: list[Term]) -> None:
        self.owner = owner
        self.terms = [term for term in terms if owner.obs_scale is not None or not term.kind.scaled]
        self.layout = layout_of(owner.observation_space)

    def __call__(self, observations: Any) -> Any:
        if not self.terms:
            return observations
        seen: Any
        if isinstance(observations, dict):
            seen = {key: np.array(value, copy=True) for key, value in observations.items()}
        else:
            seen = np.array(observations, dtype=np.float32, copy=True)
        layout = self.layout
        if isinstance(seen, dict) and layout is None:  # a Dict the space does not declare: its keys as they come
            layout = ObservationLayout(tuple((key, np.shape(value)[1:]) for key, value in seen.items()))
        for index in range(self.owner.num_envs):
            for term in self.terms:
                self._apply(term, seen, index, layout if isinstance(seen, dict) else None)
        return seen

    def _apply(self, term: Term, seen: Any, index: int, layout: ObservationLayout | None) -> None:
        owner = self.owner
        severity = owner.current[index].get(term.name, 0.0)
        rng, memory, scale = owner.rngs[index], owner.memory[index], owner.obs_scale
        observe = term.kind.observe
        assert observe is not None
        if layout is None:  # one Box: every dimension, or the target's
            row = seen[index].reshape(-1)
            columns = dimensions(term.target, row.size) if term.target else slice(None)
            part = memory.setdefault(f"observation @{term.target}", {}) if term.target else memory
            row[columns] = observe(row[columns], severity, part, rng, None if scale is None else scale[columns])
            seen[index] = row.reshape(seen[index].shape)
            return
        slices = layout.slices()
        columns = dimensions(term.target, layout.size) if term.target else None
        if term.target and columns is None:  # one key of the Dict
            key_scale = None if scale is None else scale[slices[term.target]]
            part = memory.setdefault(f"observation {term.target}", {})
            seen[term.target][index] = observe(seen[term.target][index], severity, part, rng, key_scale)
        elif term.kind.scaled or columns is not None:  # the flat vector (or its target's dimensions)
            flat = layout.flatten({key: value[index : index + 1] for key, value in seen.items()})[0]
            columns = columns or slice(None)
            part = memory.setdefault(f"observation @{term.target}", {})
            flat[columns] = observe(flat[columns], severity, part, rng, None if scale is None else scale[columns])
            for key, value in layout.unflatten(flat[None]).items():
                seen[key][index] = value[0]
        else:  # every key on its own (an unscaled kind: noise in each key's units, a delay)
            for key in layout.names:
                part = memory.setdefault(f"observation {key}", {})
                seen[key][index] = observe(seen[key][index], severity, part, rng, None)


class PolicyObservations(VecEnvWrapper):
    """Above the agent's VecNormalize: the condition's observation kinds that perturb what the policy sees (all but
    the ``raw`` ones), from its :class:`PerturbedEnv`'s generators."""

    def __init__(self, venv: VecEnv, perturbed: PerturbedEnv) -> None:
        super().__init__(venv)
        self.perturbed = perturbed
        terms = perturbed.perturbation.terms("observation")
        self.observing = ObservationTerms(perturbed, [term for term in terms if not term.kind.raw])

    def reset(self) -> Any:
        return self.observing(self.venv.reset())

    def step_wait(self) -> Any:
        observations, rewards, dones, infos = self.venv.step_wait()
        return self.observing(observations), rewards, dones, infos


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
        env = make_env(n_envs, seed)
        if not isinstance(env, VecNormalize):
            return PerturbedEnv(env, perturbation, seed, obs_scale)
        perturbed = PerturbedEnv(env.venv, perturbation, seed, obs_scale, raw_only=True)
        env.venv = perturbed  # below the statistics: what the env makes, in its own units
        return PolicyObservations(env, perturbed)

    return make
