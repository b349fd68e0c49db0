"""What each observation feature and action of the classic-control and Box2D envs is, and in which unit, from
gymnasium's env definitions (their docstrings' observation and action tables): ``policy.json`` names them for the
firmware engineer who wires sensors to the policy. An env not listed gets ``obs[i]`` and no unit."""

from __future__ import annotations

Feature = tuple[str, str]  # (name, unit)

OBSERVATIONS: dict[str, tuple[Feature, ...]] = {
    "CartPole": (
        ("cart position", "m"),
        ("cart velocity", "m/s"),
        ("pole angle", "rad"),
        ("pole angular velocity", "rad/s"),
    ),
    "Acrobot": (
        ("cos(theta1)", ""),
        ("sin(theta1)", ""),
        ("cos(theta2)", ""),
        ("sin(theta2)", ""),
        ("theta1 angular velocity", "rad/s"),
        ("theta2 angular velocity", "rad/s"),
    ),
    "MountainCar": (("car position", "m"), ("car velocity", "m/s")),
    "MountainCarContinuous": (("car position", "m"), ("car velocity", "m/s")),
    "Pendulum": (("cos(theta)", ""), ("sin(theta)", ""), ("angular velocity", "rad/s")),
    "LunarLander": (
        ("x position", "normalised"),
        ("y position", "normalised"),
        ("x velocity", "normalised"),
        ("y velocity", "normalised"),
        ("angle", "rad"),
        ("angular velocity", "normalised"),
        ("left leg contact", "0/1"),
        ("right leg contact", "0/1"),
    ),
}
OBSERVATIONS["LunarLanderContinuous"] = OBSERVATIONS["LunarLander"]

ACTIONS: dict[str, tuple[Feature, ...]] = {
    "CartPole": (("push cart: 0 left, 1 right", "index"),),
    "Acrobot": (("torque on the joint: 0 -1, 1 0, 2 +1", "index"),),
    "MountainCar": (("accelerate: 0 left, 1 none, 2 right", "index"),),
    "MountainCarContinuous": (("force on the car", "scaled, [-1, 1]"),),
    "Pendulum": (("torque", "N m"),),
    "LunarLander": (("engine: 0 none, 1 left, 2 main, 3 right", "index"),),
    "LunarLanderContinuous": (("main engine throttle", "[-1, 1]"), ("lateral engines", "[-1, 1]")),
}


def family(env_id: str) -> str:
    """``CartPole-v1`` -> ``CartPole`` (a ``module:`` prefix dropped)."""
    return env_id.split(":")[-1].rsplit("-v", 1)[0]


def named(table: dict[str, tuple[Feature, ...]], env_id: str, count: int, prefix: str) -> list[dict[str, str]]:
    """``count`` features of ``env_id`` by name and unit (``obs[i]`` and '' where the env is not listed)."""
    known = table.get(family(env_id), ())
    if len(known) != count:
        known = ()
    return [
        {"name": known[i][0], "unit": known[i][1]} if known else {"name": f"{prefix}[{i}]", "unit": ""}
        for i in range(count)
    ]
