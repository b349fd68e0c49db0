"""Env names: aliases, legacy ids, env kinds, and building evaluation envs the way rl-zoo3 does."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from functools import cache
from types import ModuleType
from typing import Any

import gymnasium as gym
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from quarl_bench.config import env_settings
from quarl_bench.errors import QuarlError
from quarl_bench.zoo.ids import DMC_PREFIX


@cache
def register_env_packages() -> None:
    """Register Atari (ale-py) and PyBullet envs with gymnasium, as rl-zoo3 does on import."""
    from quarl_bench.zoo.quiet import native_output_silenced

    with native_output_silenced():  # pybullet prints its build time from C when imported
        import rl_zoo3.import_envs  # noqa: F401  (registers ale_py and pybullet_envs_gymnasium envs)


def register_env(env_id: str) -> None:
    """Make a ``dmc/`` id or a gymnasium-robotics one known to ``gym.make`` in this process (importing ``zoo.dmc``
    costs 0.5 s here, gymnasium-robotics 0.7 s, so only for those ids; Ray workers making classic-control envs need
    nothing)."""
    if not env_id.startswith(DMC_PREFIX):
        from quarl_bench.zoo.robotics import fix_loaded_robotics, register_robotics_envs

        if env_id not in gym.registry:
            register_robotics_envs()
        fix_loaded_robotics()  # also when something else imported gymnasium-robotics first
    if env_id.startswith(DMC_PREFIX):
        from quarl_bench.extras import require

        require("mujoco", f"the Control Suite env {env_id}", ("dm_control", "shimmy"))
        import quarl_bench.zoo.dmc  # noqa: F401


def import_env_packages(packages: tuple[str, ...] | list[str]) -> None:
    """Import modules that register envs with gymnasium (``--env-package``, like rl-zoo3's ``--gym-packages``).

    :raises QuarlError: naming the module that does not import.
    """
    import importlib

    for package in packages:
        try:
            importlib.import_module(package)
        except Exception as error:  # an env package's import raises any type
            raise QuarlError(
                f"cannot import env package {package!r}: {type(error).__name__}: {error}; "
                "expected an importable module that registers gymnasium envs"
            ) from error
    from quarl_bench.zoo.robotics import fix_loaded_robotics

    fix_loaded_robotics()


def env_with_packages(name: str, packages: tuple[str, ...] | list[str] = ()) -> tuple[str, tuple[str, ...]]:
    """The env id to run and the modules to import first, from ``--env`` (gymnasium's ``module:EnvId-v0`` form
    too) and ``--env-package``.

    :raises QuarlError: for a module that does not import, or an env id that does not exist.
    """
    module, colon, env_name = name.rpartition(":")
    wanted = tuple(dict.fromkeys([*packages, *([module] if colon else [])]))
    import_env_packages(wanted)
    return resolve_env_id(env_name if colon else name), wanted


def resolve_env_id(name: str) -> str:
    """The gymnasium id to run for a user-given name: alias -> id, legacy id -> its successor.

    :raises QuarlError: when the name is neither an alias nor a registered env id.
    """
    settings = env_settings()
    env_id = settings["aliases"].get(name, name)
    env_id = settings["legacy_ids"].get(env_id, env_id)
    register_env_packages()
    register_env(env_id)  # gymnasium-robotics' ids, imported only when asked for
    if env_id not in gym.registry or env_id.startswith("dm_control/"):  # shimmy's dict observations -> dmc/ flat
        import importlib.util

        if importlib.util.find_spec("dm_control") is not None:  # the 'mujoco' extra
            from quarl_bench.zoo.dmc import dmc_env_id  # registers the Control Suite's tasks

            env_id = dmc_env_id(env_id) or env_id
    if env_id not in gym.registry:
        raise QuarlError(unknown_env_message(name, [*settings["aliases"], *gym.registry]))
    return env_id


def unknown_env_message(name: str, known: list[str]) -> str:
    """One line for an env name nothing registers: the closest known names, and how a user's own module's envs
    are found (rl-zoo3 users know ``--gym-packages``)."""
    import difflib

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    lowered = {k.lower(): k for k in known}
    if name.lower() in lowered and lowered[name.lower()] not in close:
        close.insert(0, lowered[name.lower()])
    guess = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return (
        f"unknown env {name!r}: {guess}expected a gymnasium env id or alias (CartPole, LunarLander, ...); "
        f"for an env your own module registers, pass --env my_module:{name} or --env-package my_module"
    )


def saved_env_ids(env_id: str) -> list[str]:
    """Ids an agent for ``env_id`` may have been saved under, newest first (``LunarLander-v3``, ``-v2``)."""
    legacy = [old for old, new in env_settings()["legacy_ids"].items() if new == env_id]
    return [env_id, *legacy]


def env_kind(env_id: str) -> str:
    """``atari``, ``bullet`` or ``default``, from the env's entry point."""
    register_env_packages()
    register_env(env_id)
    entry_point = str(gym.spec(env_id).entry_point)
    if "AtariEnv" in entry_point or "ale_py" in entry_point:
        return "atari"
    if "pybullet" in entry_point:
        return "bullet"
    return "default"


def entry_point_of(env_id: str) -> str:
    """The env's registered entry point ("" for an id nothing registers)."""
    register_env_packages()
    try:
        return str(gym.spec(env_id).entry_point)
    except gym.error.Error:
        return ""


def default_eval_envs(env_id: str) -> int:
    """How many envs to evaluate at once, from ``zoo_configs/envs.yaml``."""
    counts = env_settings()["eval_envs"]
    return int(counts.get(env_id, counts.get(env_kind(env_id), counts["default"])))


def make_eval_env(
    env_id: str,
    hyperparams: dict[str, Any],
    stats_path: str | None,
    env_kwargs: dict[str, Any],
    n_envs: int,
    seed: int,
) -> VecEnv:
    """rl-zoo3's ``create_test_env`` without rendering: the agent's wrappers, normalisation and frame stack.

    Env ``i`` is seeded with ``seed + i``, so two evaluations with the same seed face the same episodes. Whatever
    rl-zoo3 prints, and pybullet prints from C (its build time), is kept off the console.
    """
    from rl_zoo3.utils import create_test_env

    from quarl_bench.zoo.quiet import native_output_silenced

    register_env_packages()
    register_env(env_id)
    with gym_pickle_alias(), native_output_silenced(), contextlib.redirect_stdout(io.StringIO()), missing_extra():
        venv = create_test_env(
            env_id,
            n_envs=n_envs,
            stats_path=stats_path,
            seed=seed,
            should_render=False,
            hyperparams=dict(hyperparams),
            env_kwargs=env_kwargs,
            # rl-zoo3 defaults to one subprocess per env: far slower for cheap envs and batched inference (and for
            # Atari too, see eval_workers)
            vec_env_cls=DummyVecEnv,
        )
    reproducible_resets(venv)
    return venv


def reproducible_resets(venv: VecEnv) -> None:
    """Resets without a seed drawn from the env's own seeded generator, for envs whose own such resets draw from
    the OS: panda-gym 3 reseeds its task (the goal) with ``np_random(None)`` on every reset, so the episodes after
    the first of an auto-resetting VecEnv (calibration and fixed-state play) differed from run to run."""
    inner: Any = venv
    while hasattr(inner, "venv"):
        inner = inner.venv
    for env in getattr(inner, "envs", []):
        base = env.unwrapped
        if type(base).__module__.startswith("panda_gym."):
            base.reset = _seeded_from_own_generator(base, base.reset)


def _seeded_from_own_generator(env: Any, reset: Any) -> Any:
    def seeded_reset(*, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is None:
            seed = int(env.np_random.integers(2**31 - 1))
        return reset(seed=seed, options=options)

    return seeded_reset


@contextlib.contextmanager
def missing_extra() -> Iterator[None]:
    """gymnasium's ``DependencyNotInstalled`` (MuJoCo envs without mujoco) as one line naming the extra."""
    try:
        yield
    except gym.error.DependencyNotInstalled as error:
        raise QuarlError(
            f"this env needs a package that is not installed ({str(error).splitlines()[0]}): "
            "pip install 'quarl-bench[mujoco]' for MuJoCo envs"
        ) from error


@contextlib.contextmanager
def gym_pickle_alias() -> Iterator[None]:
    """Let pickles made with the old ``gym`` package (2021 zoo ``vecnormalize.pkl``) load with gymnasium."""
    if "gym" in sys.modules:
        yield
        return
    aliases: dict[str, ModuleType] = {"gym": gym, "gym.spaces": gym.spaces}
    for name, module in list(sys.modules.items()):
        if name.startswith("gymnasium.spaces.") and module is not None:
            aliases["gym.spaces." + name.removeprefix("gymnasium.spaces.")] = module
    sys.modules.update(aliases)
    try:
        yield
    finally:
        for name in aliases:
            sys.modules.pop(name, None)
