"""A dynamics parameter, ``PARAM=s``: the env's ``PARAM`` is scaled by a factor drawn from U[1 - s, 1 + s] at every
episode's start. CartPole's ``masspole``, ``length``, ``force_mag``; Pendulum's ``m``, ``l``, ``g``; Acrobot's
``link_mass_1``, ``link_mass_2``; MountainCar's ``force``; MountainCarContinuous' ``power``; a MuJoCo env's
``body_mass``, ``friction`` and ``actuator_gear`` (every body, geom or actuator by the same factor), gymnasium-robotics'
tasks' too (a Fetch arm follows a mocap target: its ``actuator_gear`` is the gain on the commanded displacement); a
panda-gym robot task's (PyBullet) ``body_mass`` and ``friction`` (every link of every body: the robot, the table, the
object) and ``actuator_gear`` (the joints' motor forces)."""

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
    """Whether ``env_id`` is a MuJoCo env, gymnasium's or gymnasium-robotics' (its model's arrays are what
    ``body_mass``, ``friction`` and ``actuator_gear`` scale)."""
    import gymnasium as gym

    from quarl_bench.zoo.robotics import is_robotics_mujoco

    try:
        entry_point = str(gym.spec(env_id).entry_point)
    except gym.error.Error:
        return False
    return "mujoco" in entry_point or is_robotics_mujoco(entry_point)


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


def is_pybullet_robot(env_id: str) -> bool:
    """Whether ``env_id`` is a panda-gym robot task (PyBullet), whose bodies' masses and frictions can be changed."""
    import gymnasium as gym

    try:
        return "panda_gym" in str(gym.spec(env_id).entry_point)
    except gym.error.Error:
        return False


# PyBullet's dynamics per link: (getDynamicsInfo's index, changeDynamics's keyword)
PYBULLET = {"body_mass": (0, "mass"), "friction": (1, "lateralFriction")}


def _links(env: Any) -> list[tuple[int, int]]:
    client = env.sim.physics_client
    return [(body, link) for body in env.sim._bodies_idx.values() for link in range(-1, client.getNumJoints(body))]


def _mocap_gain(env: Any) -> np.ndarray:
    """A Fetch arm's gain: how far it moves per unit of action (x, y, z), 1 as the env is made."""
    if not hasattr(env, "_mocap_gain"):
        env._mocap_gain = np.ones(1)
        set_action = env._set_action

        def scaled_action(action: np.ndarray) -> None:  # the arm's three displacement components, not the gripper
            action = np.array(action, dtype=float, copy=True)
            action[:3] *= env._mocap_gain[0]
            set_action(action)

        env._set_action = scaled_action
    return env._mocap_gain


def _mujoco(name: str, array: str) -> PerturbationKind:
    def read(env: Any) -> np.ndarray:
        if name == "actuator_gear" and hasattr(env, "initial_gripper_xpos"):  # a Fetch task
            return np.array(_mocap_gain(env), copy=True)
        if hasattr(env, "model"):
            return np.array(getattr(env.model, array), copy=True)
        if name == "actuator_gear":  # panda-gym: the joints' motor forces
            return np.array(env.robot.joint_forces, copy=True)
        client, (index, _) = env.sim.physics_client, PYBULLET[name]
        return np.array([client.getDynamicsInfo(body, link)[index] for body, link in _links(env)])

    def write(env: Any, value: np.ndarray) -> None:
        if name == "actuator_gear" and hasattr(env, "initial_gripper_xpos"):
            _mocap_gain(env)[:] = value
            return
        if hasattr(env, "model"):
            getattr(env.model, array)[:] = value
            return
        if name == "actuator_gear":
            env.robot.joint_forces = np.asarray(value)
            return
        client, (_, keyword) = env.sim.physics_client, PYBULLET[name]
        for (body, link), scaled in zip(_links(env), np.asarray(value), strict=True):
            client.changeDynamics(body, link, **{keyword: float(scaled)})

    return PerturbationKind(
        name,
        "dynamics",
        *SPREAD,
        f"MuJoCo {array} or a panda-gym robot's, x U[1-s, 1+s] per episode",
        read=read,
        write=write,
        accepts=lambda env_id: is_mujoco(env_id) or is_pybullet_robot(env_id),
    )


for _family, _names in DYNAMICS.items():
    for _name in _names:
        register_perturbation(_classic(_family, _name))
for _name, _array in MUJOCO.items():
    register_perturbation(_mujoco(_name, _array))
