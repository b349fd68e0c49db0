"""A dynamics parameter, ``PARAM=s``: the env's ``PARAM`` is scaled by a factor drawn from U[1 - s, 1 + s] at every
episode's start. CartPole's ``masspole``, ``length``, ``force_mag``; Pendulum's ``m``, ``l``, ``g``; Acrobot's
``link_mass_1``, ``link_mass_2``; MountainCar's ``force``; MountainCarContinuous' ``power``; a MuJoCo env's
``body_mass``, ``friction`` and ``actuator_gear`` (every body, geom or actuator by the same factor)."""

from __future__ import annotations

from typing import Any

import numpy as np

from quarl_bench.perturbations import PerturbationKind, register_perturbation

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
SPREAD = (0.0, 0.9)  # a factor stays in [0.1, 1.9]


def family_of(env_id: str) -> str | None:
    """The classic-control family an env id belongs to (the longest matching prefix)."""
    return next((name for name in sorted(DYNAMICS, key=len, reverse=True) if env_id.startswith(name)), None)


def is_mujoco(env_id: str) -> bool:
    """Whether ``env_id`` is a MuJoCo env (its model's arrays are what ``body_mass``, ``friction`` and
    ``actuator_gear`` scale)."""
    import gymnasium as gym

    try:
        return "mujoco" in str(gym.spec(env_id).entry_point)
    except gym.error.Error:
        return False


def _derived(env: Any) -> None:
    """CartPole derives these in its constructor: keep them true to a new pole mass or length."""
    if hasattr(env, "masscart") and hasattr(env, "polemass_length"):
        env.total_mass = env.masspole + env.masscart
        env.polemass_length = env.masspole * env.length


def _classic(family: str, name: str) -> PerturbationKind:
    def read(env: Any) -> float:
        return float(getattr(env, ALIASES.get(name, name)))

    def write(env: Any, value: float) -> None:
        setattr(env, ALIASES.get(name, name), value)
        _derived(env)

    return PerturbationKind(
        name,
        "dynamics",
        *SPREAD,
        f"{family}'s {name}, x U[1-s, 1+s] per episode",
        read=read,
        write=write,
        accepts=lambda env_id: family_of(env_id) == family,
    )


def _mujoco(name: str, array: str) -> PerturbationKind:
    def read(env: Any) -> np.ndarray:
        return np.array(getattr(env.model, array), copy=True)

    def write(env: Any, value: np.ndarray) -> None:
        getattr(env.model, array)[:] = value

    return PerturbationKind(
        name,
        "dynamics",
        *SPREAD,
        f"MuJoCo {array}, x U[1-s, 1+s] per episode",
        read=read,
        write=write,
        accepts=is_mujoco,
    )


for _family, _names in DYNAMICS.items():
    for _name in _names:
        register_perturbation(_classic(_family, _name))
for _name, _array in MUJOCO.items():
    register_perturbation(_mujoco(_name, _array))
