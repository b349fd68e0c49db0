"""Conditions a policy is played under besides the nominal simulator (``--perturb``): sensor noise, actuator noise,
delayed and sticky actions, and dynamics a robot will meet.

A condition is ``name=severity`` pairs, comma-separated (``obs-noise=0.1,action-delay=1``):

- ``obs-noise=σ``: Gaussian noise on every observation, σ times each dimension's spread over the fp32 policy's
  fixed-state set (so one σ means the same for a position and a velocity);
- ``action-noise=σ``: Box actions get Gaussian noise of σ times half their range (clipped to the bounds); Discrete
  actions are replaced by a uniformly drawn one with probability σ;
- ``action-delay=k``: the env receives the action chosen k steps before (the first action until then);
- ``sticky=p``: the env repeats the previous action with probability p;
- ``init-spread=s``: wider initial states, the range the env draws its start from (1 + s) times as wide about its
  centre (CartPole's, Acrobot's and MountainCar's reset bounds, Pendulum's initial angular velocity, a MuJoCo env's
  reset noise scale); the env's own seeded generator draws the start, so paired episodes start alike;
- a dynamics parameter, ``PARAM=s``: the env's ``PARAM`` is scaled by a factor drawn from U[1 - s, 1 + s] at every
  episode's start (:data:`DYNAMICS`: CartPole's ``masspole``, ``length``, ``force_mag``; Pendulum's ``m``, ``l``,
  ``g``; Acrobot's ``link_mass_1``, ``link_mass_2``; MountainCar's ``force``; MountainCarContinuous' ``power``; a
  MuJoCo env's ``body_mass``, ``friction`` and ``actuator_gear``, every body, geom or actuator by the same factor).

A **mixture**, ``name~a/b/c``, draws the severity of each episode uniformly from the list (the suite's
distribution, decided over in one certification), where ``name=a/b/c`` is a grid of three conditions, decided
one by one.

Every episode draws its perturbation from its own generator, seeded by (job seed, env index, episode number): the
fp32 and the quantized policy meet the same noise and the same dynamics on the same paired episode, whatever
either did in the episodes before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from quarl_bench.errors import QuarlError

STREAM = 0x5EED  # the generators' stream, apart from the evaluation's own draws
KINDS = {
    "obs-noise": (0.0, 10.0),
    "action-noise": (0.0, 1.0),
    "action-delay": (0, 50),
    "sticky": (0.0, 1.0),
    "init-spread": (0.0, 10.0),
}
# the reset bounds (gymnasium's defaults) init-spread widens, by env id prefix
RESET_BOUNDS = {"CartPole": (-0.05, 0.05), "Acrobot": (-0.1, 0.1), "MountainCar": (-0.6, -0.4)}
PENDULUM_SPEED = 1.0  # Pendulum draws its initial angular velocity from U[-1, 1] (its reset option y_init)
# the dynamics parameters each classic-control env takes (by env id prefix; attribute names as in gymnasium)
DYNAMICS = {
    "CartPole": ("masspole", "length", "force_mag"),
    "Pendulum": ("m", "l", "g"),
    "Acrobot": ("link_mass_1", "link_mass_2"),
    "MountainCarContinuous": ("power",),
    "MountainCar": ("force",),
}
ALIASES = {"link_mass_1": "LINK_MASS_1", "link_mass_2": "LINK_MASS_2"}  # Acrobot's are class constants
# a MuJoCo env's model arrays, each scaled as a whole by one factor per episode
MUJOCO = {"body_mass": "body_mass", "friction": "geom_friction", "actuator_gear": "actuator_gear"}


def _derived(env: Any) -> None:
    """CartPole derives these in its constructor: keep them true to a new pole mass or length."""
    if hasattr(env, "masscart") and hasattr(env, "polemass_length"):
        env.total_mass = env.masspole + env.masscart
        env.polemass_length = env.masspole * env.length


@dataclass(frozen=True)
class Perturbation:
    """One condition: severities by name (``obs-noise``, ``action-noise``, ``action-delay``, ``sticky``,
    ``init-spread`` or a dynamics parameter), and mixtures (a severity drawn per episode from a list); ``text`` is
    its canonical spelling, part of a job's identity."""

    severities: tuple[tuple[str, float], ...]
    mixtures: tuple[tuple[str, tuple[float, ...]], ...] = ()

    @property
    def text(self) -> str:
        parts = {name: f"{name}={value:g}" for name, value in self.severities}
        parts |= {name: f"{name}~" + "/".join(f"{v:g}" for v in values) for name, values in self.mixtures}
        return ",".join(parts[name] for name in sorted(parts))

    def get(self, name: str, default: float = 0.0) -> float:
        """A fixed severity (a mixture's is drawn per episode: :meth:`drawn`)."""
        return dict(self.severities).get(name, default)

    def uses(self, name: str) -> bool:
        return name in dict(self.severities) or name in dict(self.mixtures)

    @property
    def dynamics(self) -> tuple[str, ...]:
        """The dynamics parameters it changes, fixed or mixed."""
        names = [name for name, _ in self.severities] + [name for name, _ in self.mixtures]
        return tuple(sorted(name for name in names if name not in KINDS))

    def drawn(self, rng: np.random.Generator) -> dict[str, float]:
        """One episode's severities: the fixed ones, and each mixture's drawn uniformly from its list."""
        return dict(self.severities) | {name: float(rng.choice(values)) for name, values in self.mixtures}


def parse_perturbation(text: str) -> Perturbation:
    """A condition from ``name=severity,...`` (empty: none).

    :raises QuarlError: in one line, for a name or severity outside what is accepted.
    """
    found: dict[str, float] = {}
    mixed: dict[str, tuple[float, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "~" in part and "=" not in part:
            name, _, values = part.partition("~")
            if name == "init-spread":
                raise QuarlError(f"bad perturbation {part!r}: the start range is set once, expected init-spread=S")
            mixed[name] = tuple(_severity(name, value, part) for value in values.split("/"))
            continue
        name, equals, value = part.partition("=")
        if "/" in value:
            raise QuarlError(
                f"bad perturbation {part!r}: a severity grid (a/b/c) is certify's; run and sensitivity play one "
                "condition, NAME=SEVERITY"
            )
        if not equals:
            raise QuarlError(f"bad perturbation {part!r}: expected NAME=SEVERITY, e.g. obs-noise=0.1 or masspole=0.2")
        found[name] = _severity(name, value, part)
    both = sorted(found.keys() & mixed.keys())
    if both:
        raise QuarlError(f"bad perturbation {both[0]!r}: given both fixed (=) and mixed (~), expected one")
    return Perturbation(
        tuple(sorted((name, value) for name, value in found.items() if value)),
        tuple(sorted(mixed.items())),
    )


def _severity(name: str, value: str, part: str) -> float:
    """:raises QuarlError: for a severity that is no number or lies outside its name's range."""
    try:
        severity = float(value)
    except ValueError:
        severity = float("nan")
    if not np.isfinite(severity):
        raise QuarlError(f"bad perturbation {part!r}: expected NAME=SEVERITY, e.g. obs-noise=0.1 or masspole=0.2")
    low, high = KINDS.get(name, (0.0, 0.9))  # a dynamics factor stays in [0.1, 1.9]
    if not low <= severity <= high or (name == "action-delay" and severity != int(severity)):
        what = "an integer" if name == "action-delay" else "a severity"
        raise QuarlError(f"bad severity {value} for {name}: expected {what} in [{low:g}, {high:g}]")
    return severity


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


def check_dynamics(perturbation: Perturbation, env_id: str) -> None:
    """:raises QuarlError: naming a dynamics parameter ``env_id`` does not have, and the ones it has (or wider
    initial states for an env whose start quarl-bench cannot widen)."""
    if perturbation.get("init-spread") and wider_start_options(env_id, 1.0) is None and not is_mujoco(env_id):
        raise QuarlError(
            f"bad perturbation 'init-spread' for {env_id}: expected an env whose start quarl-bench can widen "
            f"({', '.join(RESET_BOUNDS)}, Pendulum or a MuJoCo env)"
        )
    if not perturbation.dynamics:
        return
    family = next((name for name in sorted(DYNAMICS, key=len, reverse=True) if env_id.startswith(name)), None)
    known = DYNAMICS.get(family or "", ()) + (tuple(MUJOCO) if is_mujoco(env_id) else ())
    for name in perturbation.dynamics:
        if name not in known:
            has = ", ".join(known) if known else "none quarl-bench can change"
            raise QuarlError(
                f"bad perturbation {name!r} for {env_id}: expected obs-noise, action-noise, action-delay, sticky or "
                f"one of its dynamics parameters ({has})"
            )


def condition_for(text: str, env_id: str) -> str:
    """The canonical spelling of ``text`` for ``env_id`` ('' for none).

    :raises QuarlError: in one line, for a bad name or severity, or a dynamics parameter the env does not have.
    """
    condition = parse_perturbation(named_condition(text.strip()))
    check_dynamics(condition, env_id)
    if condition.uses("obs-noise") and _has_dict_observations(env_id):
        raise QuarlError(
            f"bad perturbation 'obs-noise' for {env_id}: its observations are a Dict (a goal-reaching env), whose "
            "per-dimension spread quarl-bench does not measure; expected action-noise, action-delay, sticky, "
            "init-spread or a dynamics parameter"
        )
    return condition.text


def _has_dict_observations(env_id: str) -> bool:
    import gymnasium as gym

    from quarl_bench.zoo.envs import register_env_packages
    from quarl_bench.zoo.quiet import native_output_silenced

    register_env_packages()
    with native_output_silenced():  # pybullet envs print from C as they start
        env = gym.make(env_id)
    try:
        return isinstance(env.observation_space, spaces.Dict)
    finally:
        env.close()


class PerturbedEnv(VecEnvWrapper):
    """The agent's envs under one condition, each episode's perturbation drawn from its own generator."""

    def __init__(self, venv: VecEnv, perturbation: Perturbation, seed: int, obs_scale: np.ndarray | None) -> None:
        super().__init__(venv)
        self.perturbation, self.base_seed, self.obs_scale = perturbation, seed, obs_scale
        self.episode = np.zeros(self.num_envs, dtype=int)
        self.rngs = [self._generator(i) for i in range(self.num_envs)]
        self.previous: list[Any] = [None] * self.num_envs
        self.delayed: list[list[Any]] = [[] for _ in range(self.num_envs)]
        self.bases = _base_envs(venv)
        self.nominal = [{name: _read(env, name) for name in perturbation.dynamics} for env in self.bases]
        self.current: list[dict[str, float]] = [dict(perturbation.severities) for _ in range(self.num_envs)]
        if perturbation.get("init-spread"):
            for env in self.bases:
                _widen_start(env, 1 + perturbation.get("init-spread"))

    def _generator(self, index: int) -> np.random.Generator:
        return np.random.default_rng([self.base_seed, STREAM, index, int(self.episode[index])])

    def _start_episode(self, index: int) -> None:
        self.rngs[index] = self._generator(index)
        self.previous[index], self.delayed[index] = None, []
        env, rng = self.bases[index], self.rngs[index]
        self.current[index] = severity = self.perturbation.drawn(rng)
        for name in self.perturbation.dynamics:
            spread = severity.get(name, 0.0)
            _write(env, name, self.nominal[index][name] * rng.uniform(1 - spread, 1 + spread))

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
        rng, space, severity = self.rngs[index], self.action_space, self.current[index]
        noise = severity.get("action-noise", 0.0)
        if noise and isinstance(space, spaces.Discrete) and rng.random() < noise:
            action = space.start + rng.integers(space.n)
        elif noise and isinstance(space, spaces.Box):
            action = np.clip(action + rng.normal(0.0, noise * (space.high - space.low) / 2), space.low, space.high)
        delay = int(severity.get("action-delay", 0))
        if delay:
            self.delayed[index].append(action)
            action = self.delayed[index].pop(0) if len(self.delayed[index]) > delay else self.delayed[index][0]
        sticky = severity.get("sticky", 0.0)
        if sticky and self.previous[index] is not None and rng.random() < sticky:
            action = self.previous[index]
        self.previous[index] = action
        return action

    def step_wait(self) -> Any:
        observations, rewards, dones, infos = self.venv.step_wait()
        for index in np.flatnonzero(dones):
            self.episode[index] += 1
            self._start_episode(int(index))
        return self._observed(observations), rewards, dones, infos

    def _observed(self, observations: Any) -> Any:
        if not self.perturbation.uses("obs-noise") or self.obs_scale is None:
            return observations
        noisy = np.array(observations, dtype=np.float32, copy=True)
        for index in range(self.num_envs):
            sigma = self.current[index].get("obs-noise", 0.0)
            noisy[index] += (sigma * self.obs_scale * self.rngs[index].standard_normal(self.obs_scale.shape)).astype(
                np.float32
            )
        return noisy


def wider_start_options(env_id: str, factor: float) -> dict[str, Any] | None:
    """The reset options that draw a classic-control env's start from a range ``factor`` times as wide about its
    centre (None: not a classic-control env with reset bounds)."""
    if env_id.startswith("Pendulum"):
        return {"y_init": PENDULUM_SPEED * factor}
    family = next((name for name in RESET_BOUNDS if env_id.startswith(name)), None)
    if family is None:
        return None
    low, high = RESET_BOUNDS[family]
    centre, half = (low + high) / 2, (high - low) / 2 * factor
    return {"low": centre - half, "high": centre + half}


def _widen_start(env: Any, factor: float) -> None:
    """Every later reset of ``env`` (an unwrapped gymnasium env) draws from a start range ``factor`` times as wide:
    a MuJoCo env's reset noise scale, or a classic-control env's reset options (the vectorised env's automatic
    resets pass none, so the env's own ``reset`` is given them)."""
    if hasattr(env, "_reset_noise_scale"):
        env._reset_noise_scale = env._reset_noise_scale * factor
        return
    wider = wider_start_options(env.spec.id, factor)
    reset = env.reset

    def wider_reset(*, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return reset(seed=seed, options=options or wider)

    env.reset = wider_reset


def _base_envs(venv: VecEnv) -> list[Any]:
    """The unwrapped gymnasium envs inside ``venv`` (a DummyVecEnv under any VecEnv wrappers)."""
    inner: Any = venv
    while hasattr(inner, "venv"):
        inner = inner.venv
    return [env.unwrapped for env in getattr(inner, "envs", [])]


def is_mujoco(env_id: str) -> bool:
    """Whether ``env_id`` is a MuJoCo env (its model's arrays are what ``body_mass``, ``friction`` and
    ``actuator_gear`` scale)."""
    import gymnasium as gym

    try:
        return "mujoco" in str(gym.spec(env_id).entry_point)
    except gym.error.Error:
        return False


def _read(env: Any, name: str) -> Any:
    """A parameter's nominal value: a number, or a copy of a MuJoCo model's array."""
    if name in MUJOCO:
        return np.array(getattr(env.model, MUJOCO[name]), copy=True)
    return float(getattr(env, ALIASES.get(name, name)))


def _write(env: Any, name: str, value: Any) -> None:
    if name in MUJOCO:
        getattr(env.model, MUJOCO[name])[:] = value
        return
    setattr(env, ALIASES.get(name, name), value)
    _derived(env)


def perturbed_envs(
    make_env: Callable[[int, int], VecEnv], perturbation: Perturbation, obs_scale: np.ndarray | None
) -> Callable[[int, int], VecEnv]:
    """``make_env`` whose envs play under ``perturbation``."""

    def make(n_envs: int, seed: int) -> VecEnv:
        return PerturbedEnv(make_env(n_envs, seed), perturbation, seed, obs_scale)

    return make
