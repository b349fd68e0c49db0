"""Train an fp32 baseline with rl-zoo3's tuned hyperparameters, saved in the rl-zoo3 layout."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from quarl_bench.errors import QuarlError


def train_baseline(algo: str, env_id: str, cache_dir: Path, seed: int = 0, n_timesteps: int | None = None) -> None:
    """Run ``python -m rl_zoo3.train`` into ``cache_dir/{algo}/{env_id}_N`` (its own, unmodified trainer).

    :raises QuarlError: when rl-zoo3 has no hyperparameters for the pair or training fails.
    """
    command = [
        sys.executable,
        "-m",
        "rl_zoo3.train",
        "--algo",
        algo,
        "--env",
        env_id,
        "-f",
        str(cache_dir),
        "--seed",
        str(seed),
        "--eval-freq",
        "-1",
        "--vec-env",
        "dummy",
        "--log-interval",
        "-1",
    ]
    if n_timesteps:
        command += ["-n", str(n_timesteps)]
    extras = zoo_extras(algo, env_id)
    command += extras
    source = f"hyperparameters from {extras[1]}" if "--conf-file" in extras else "rl-zoo3's hyperparameters"
    print(f"Training an fp32 {algo} baseline on {env_id} with {source}: {' '.join(command[1:])}")
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:] or [""]
        raise QuarlError(f"training {algo} on {env_id} failed: {tail[0]}")


def zoo_extras(algo: str, env_id: str) -> list[str]:
    """rl-zoo3 train flags for envs it does not know: our hyperparameters file, the module registering the env."""
    from quarl_bench.config import hyperparams_file
    from quarl_bench.zoo.ids import DMC_PREFIX

    extras = []
    conf = hyperparams_file(algo, env_id)
    if conf is not None:
        extras += ["--conf-file", str(conf)]
    if env_id.startswith(DMC_PREFIX):
        extras += ["--gym-packages", "quarl_bench.zoo.dmc"]
    return extras


def train_with_callbacks(
    algo: str,
    env_id: str,
    log_folder: Path,
    seed: int,
    n_timesteps: int | None,
    prepare: Callable[[BaseAlgorithm, int], list[BaseCallback]],
    extra_args: dict[str, Any] | None = None,
    hyperparams: dict[str, Any] | None = None,
    device: str = "cpu",
    algo_class: type[BaseAlgorithm] | None = None,
) -> Path:
    """Train in-process with rl-zoo3's ExperimentManager (its hyperparameters, envs and saving), after
    ``prepare(model, n_timesteps)`` has changed the fresh model and returned callbacks to add. Returns the run folder.
    ``hyperparams`` override rl-zoo3's (same format as its YAML, e.g. ``{"policy_kwargs": "dict(net_arch=[64])"}``).
    ``algo_class``: a subclass of the algo's SB3 class that rl-zoo3 builds instead (same constructor).

    :raises QuarlError: when rl-zoo3 has no hyperparameters for the pair.
    """
    from unittest import mock

    from rl_zoo3 import exp_manager
    from rl_zoo3.exp_manager import ExperimentManager

    from quarl_bench.config import hyperparams_file

    args = argparse.Namespace(
        algo=algo, env=env_id, env_kwargs=None, seed=seed, n_timesteps=n_timesteps or -1, **(extra_args or {})
    )
    manager = ExperimentManager(
        args,
        algo,
        env_id,
        str(log_folder),
        n_timesteps=n_timesteps or 0,
        eval_freq=-1,
        seed=seed,
        hyperparams=hyperparams,
        log_interval=-2,
        verbose=0,
        vec_env_type="dummy",
        device=device,
        config=str(hyperparams_file(algo, env_id) or "") or None,
    )
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            with mock.patch.dict(exp_manager.ALGOS, {algo: algo_class} if algo_class else {}):
                setup = manager.setup_experiment()
        except (KeyError, ValueError) as error:
            raise QuarlError(f"rl-zoo3 has no {algo} hyperparameters for {env_id}: {error}") from error
        assert setup is not None
        model, _ = setup
        manager.callbacks.extend(prepare(model, int(manager.n_timesteps)))
        manager.learn(model)
        manager.save_trained_model(model)
    return Path(manager.save_path)
