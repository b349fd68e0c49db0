"""``init-spread=s``: wider initial states, the range the env draws its start from (1 + s) times as wide about its
centre (CartPole's, Acrobot's and MountainCar's reset bounds, Pendulum's initial angular velocity, a MuJoCo env's
reset noise scale, a panda-gym or gymnasium-robotics Fetch task's goal and object ranges in x and y); the env's own seeded generator draws the
start, so paired episodes start alike."""

from __future__ import annotations

from typing import Any

from quarl_bench.perturbations import PerturbationKind, register_perturbation

# the reset bounds (gymnasium's defaults) init-spread widens, by env id prefix
RESET_BOUNDS = {"CartPole": (-0.05, 0.05), "Acrobot": (-0.1, 0.1), "MountainCar": (-0.6, -0.4)}
PENDULUM_SPEED = 1.0  # Pendulum draws its initial angular velocity from U[-1, 1] (its reset option y_init)


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


def widen_start(env: Any, severity: float) -> None:
    """Every later reset of ``env`` (an unwrapped gymnasium env) draws from a start range (1 + ``severity``) times as
    wide: a MuJoCo env's reset noise scale, or a classic-control env's reset options (the vectorised env's automatic
    resets pass none, so the env's own ``reset`` is given them)."""
    factor = 1 + severity
    if hasattr(env, "_reset_noise_scale"):
        env._reset_noise_scale = env._reset_noise_scale * factor
        return
    task = getattr(env, "task", None)
    if task is not None and hasattr(task, "goal_range_low"):
        for name in ("goal_range", "obj_range"):
            if hasattr(task, f"{name}_low"):
                _widen_horizontally(task, name, factor)
        return
    if hasattr(env, "target_range") and hasattr(env, "initial_gripper_xpos"):
        _widen_fetch(env, factor)
        return
    wider = wider_start_options(env.spec.id, factor)
    reset = env.reset

    def wider_reset(*, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return reset(seed=seed, options=options or wider)

    env.reset = wider_reset


def _widen_horizontally(task: Any, name: str, factor: float) -> None:
    """A panda-gym task's ``name`` range (goal or object) ``factor`` times as wide in x and y about its centre; z
    keeps its range (wider below would put goals inside the table)."""
    low, high = getattr(task, f"{name}_low").astype(float), getattr(task, f"{name}_high").astype(float)
    centre, half = (low + high) / 2, (high - low) / 2
    low[:2], high[:2] = centre[:2] - half[:2] * factor, centre[:2] + half[:2] * factor
    setattr(task, f"{name}_low", low)
    setattr(task, f"{name}_high", high)


def _widen_fetch(env: Any, factor: float) -> None:
    """A Fetch task's object range (x and y already) and its goals' spread in x and y about the gripper's start
    (plus the task's target offset) ``factor`` times as wide; the goal's own draw is the env's, so it stays seeded."""
    import numpy as np

    if hasattr(env, "obj_range"):
        env.obj_range = env.obj_range * factor
    sample_goal = env._sample_goal

    def wider_goal() -> Any:
        goal = np.array(sample_goal(), copy=True)
        centre = (env.initial_gripper_xpos[:3] + env.target_offset)[:2]
        goal[:2] = centre + (goal[:2] - centre) * factor
        return goal

    env._sample_goal = wider_goal


def is_fetch_task(env_id: str) -> bool:
    """Whether ``env_id`` is a gymnasium-robotics Fetch task (MuJoCo; goals drawn about the gripper's start)."""
    from quarl_bench.zoo.envs import entry_point_of

    entry_point = entry_point_of(env_id)
    return entry_point.startswith("gymnasium_robotics.envs.fetch.") and "MujocoPy" not in entry_point


def is_panda_task(env_id: str) -> bool:
    """Whether ``env_id`` is a panda-gym robot task (its goal and object ranges are what init-spread widens)."""
    from quarl_bench.zoo.envs import entry_point_of

    return "panda_gym" in entry_point_of(env_id)


def accepts(env_id: str) -> bool:
    from quarl_bench.perturbations.dynamics import is_mujoco
    from quarl_bench.zoo.envs import entry_point_of
    from quarl_bench.zoo.robotics import is_robotics_mujoco

    gym_mujoco = is_mujoco(env_id) and not is_robotics_mujoco(entry_point_of(env_id))  # their reset noise scale
    return wider_start_options(env_id, 1.0) is not None or gym_mujoco or is_panda_task(env_id) or is_fetch_task(env_id)


register_perturbation(
    PerturbationKind(
        "init-spread",
        "reset",
        0.0,
        10.0,
        "the start range (1 + s) times as wide",
        mixable=False,
        wrap=widen_start,
        accepts=accepts,
        why_not=f"expected an env whose start quarl-bench can widen ({', '.join(RESET_BOUNDS)}, Pendulum, a MuJoCo env "
        "or a panda-gym or Fetch task)",
    )
)
