"""Train an fp32 baseline with rl-zoo3's tuned hyperparameters, saved in the rl-zoo3 layout."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from quarl_bench.errors import QuarlError
from quarl_bench.types import file_name

# rl-zoo3's policies are small MLPs: beside a busy process on 2 cores one torch thread trained 100,000 PPO CartPole
# steps in 56.8 s against 97.3 s with the default (quiet: 19.1 s and 18.9 s), and a subprocess inherits no thread
# setting, so it is passed
TRAINING_THREADS = 1
_STEPS = re.compile(r"\|\s*total_timesteps\s*\|\s*(\d+)")
_PLANNED = re.compile(r"'n_timesteps', ([0-9.e+]+)")


@dataclass(frozen=True)
class TrainOptions:
    """How ``train`` runs rl-zoo3's trainer besides the pair, seed and budget.

    :param conf_file: an rl-zoo3 hyperparameter file (YAML) in place of quarl-bench's and rl-zoo3's own.
    :param hyperparams: rl-zoo3's ``--hyperparams`` overrides, ``KEY:VALUE`` each.
    :param save_freq: a checkpoint every this many steps (None: a tenth of the budget; -1: none).
    :param resume: continue an interrupted run from its latest checkpoint.
    """

    conf_file: Path | None = None
    hyperparams: tuple[str, ...] = ()
    save_freq: int | None = None
    resume: bool = False


def train_baseline(
    algo: str,
    env_id: str,
    cache_dir: Path,
    seed: int = 0,
    n_timesteps: int | None = None,
    options: TrainOptions | None = None,
) -> None:
    """Run ``python -m rl_zoo3.train`` into ``cache_dir/{algo}/{env_id}_N`` (its own, unmodified trainer), on one
    torch thread, with progress on stderr, saving a checkpoint every ``save_freq`` steps (default: a tenth of the
    budget). A run that fails or is interrupted keeps its folder only where it saved a checkpoint, and ``resume``
    continues from the latest one for the rest of the budget (rl-zoo3's ``--trained-agent``; its checkpoints hold the
    model, not an off-policy replay buffer or VecNormalize's running statistics, which start again). Partial
    folders with no checkpoint are removed first.

    :raises QuarlError: when rl-zoo3 has no hyperparameters for the pair, there is no checkpoint to resume, or
        training fails.
    """
    options = options or TrainOptions()
    conf_file, hyperparams, save_freq, resume = (
        options.conf_file,
        options.hyperparams,
        options.save_freq,
        options.resume,
    )
    remove_partial_runs(cache_dir, algo, env_id)
    budget = n_timesteps or planned_steps(algo, env_id, conf_file)
    checkpoint = latest_checkpoint(cache_dir, algo, env_id) if resume else None
    if resume and checkpoint is None:
        raise QuarlError(
            f"bad --resume: no checkpoint of {algo} {env_id} in {cache_dir} (expected an interrupted run's "
            "rl_model_*_steps.zip); train without --resume"
        )
    before = set(run_folders(cache_dir, algo, env_id))
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
        "1",
        "--num-threads",
        str(TRAINING_THREADS),
    ]
    remaining = budget
    if checkpoint is not None:
        remaining = max(1, (budget or 0) - checkpoint[1]) if budget else None
        command += ["--trained-agent", str(checkpoint[0])]
        print(f"Resuming from {checkpoint[0]} ({checkpoint[1]} steps done)", flush=True)
    if remaining:
        command += ["-n", str(remaining)]
    frequency = save_freq if save_freq is not None else max(1000, (budget or 0) // 10)
    if frequency > 0:
        command += ["--save-freq", str(frequency)]
    extras = zoo_extras(algo, env_id)
    if conf_file is not None:
        if not Path(conf_file).is_file():
            raise QuarlError(f"bad --conf-file {str(conf_file)!r}: no such file; expected an rl-zoo3 YAML")
        extras = [
            *(e for e in extras if e != "--conf-file" and not e.endswith((".yml", ".yaml"))),
            "--conf-file",
            str(conf_file),
        ]
    if hyperparams:
        extras += ["--hyperparams", *hyperparams]
    command += extras
    n_timesteps = remaining
    source = f"hyperparameters from {extras[1]}" if "--conf-file" in extras else "rl-zoo3's hyperparameters"
    print(f"Training an fp32 {algo} baseline on {env_id} with {source}: {' '.join(command[1:])}", flush=True)
    finished = False
    try:
        code, tail = run_with_progress(command, n_timesteps, f"training {algo} {env_id} (steps)")
        finished = code == 0
    finally:
        if not finished:
            for folder in set(run_folders(cache_dir, algo, env_id)) - before:
                if checkpoints(folder):  # kept: --resume continues from its latest checkpoint
                    # rl-zoo3 saves the model it has when interrupted as if it were the final one: the run did not
                    # finish its budget, so that file must not make the folder look finished (its child is dead now)
                    (folder / f"{file_name(env_id)}.zip").unlink(missing_ok=True)
                    print(
                        f"Kept {folder}: checkpoint at {max(checkpoints(folder))} steps; `quarl-bench train --algo "
                        f"{algo} --env {env_id} --resume` continues it",
                        file=sys.stderr,
                    )
                else:
                    shutil.rmtree(folder, ignore_errors=True)
    if not finished:
        raise QuarlError(f"training {algo} on {env_id} failed: {tail}")
    if checkpoint is not None:  # its model lives on in the finished run
        shutil.rmtree(checkpoint[0].parent, ignore_errors=True)


def run_with_progress(command: list[str], n_timesteps: int | None, what: str) -> tuple[int, str]:
    """Run a trainer, reading SB3's log tables for its step count; returns its exit code and last output line."""
    from quarl_bench.progress import progress

    env = {**os.environ, "OMP_NUM_THREADS": str(TRAINING_THREADS), "PYTHONUNBUFFERED": "1"}
    last = ""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert process.stdout is not None
    planned = float(n_timesteps or 0)
    update = None
    with contextlib.ExitStack() as stack:
        try:
            for line in process.stdout:
                if line.strip():
                    last = line.strip()
                if not planned and (found := _PLANNED.search(line)):
                    planned = float(found.group(1))
                if planned and update is None:
                    update = stack.enter_context(progress(planned, what, every=planned / 10))
                if update is not None and (steps := _STEPS.search(line)):
                    update(min(float(steps.group(1)), planned))
            code = process.wait()
        except BaseException:
            process.kill()
            process.wait()
            raise
        if code == 0 and update is not None:
            update(planned)
    return code, last


def run_folders(cache_dir: Path, algo: str, env_id: str) -> list[Path]:
    """rl-zoo3's run folders of the pair: ``cache_dir/{algo}/{env_id}_N``."""
    root = Path(cache_dir) / algo
    return [path for path in root.glob(f"{env_id}_*") if path.is_dir() and path.name[len(env_id) + 1 :].isdigit()]


CHECKPOINT = re.compile(r"rl_model_(\d+)_steps\.zip$")


def checkpoints(folder: Path) -> dict[int, Path]:
    """A run folder's checkpoints by their step count."""
    found = {}
    for path in folder.glob("rl_model_*_steps.zip"):
        match = CHECKPOINT.search(path.name)
        if match:
            found[int(match.group(1))] = path
    return found


def latest_checkpoint(cache_dir: Path, algo: str, env_id: str) -> tuple[Path, int] | None:
    """The latest checkpoint of an unfinished run of the pair (one without its final ``{env}.zip``), or None."""
    found = [
        (steps, path)
        for folder in run_folders(cache_dir, algo, env_id)
        if not (folder / f"{file_name(env_id)}.zip").is_file()
        for steps, path in checkpoints(folder).items()
    ]
    if not found:
        return None
    steps, path = max(found)
    return path, steps


def planned_steps(algo: str, env_id: str, conf_file: Path | None = None) -> int | None:
    """The budget rl-zoo3 trains the pair for (``n_timesteps`` of the hyperparameter file it reads), or None."""
    import yaml

    from quarl_bench.config import zoo_hyperparameters

    if conf_file is not None and Path(conf_file).is_file():
        entry = (yaml.safe_load(Path(conf_file).read_text()) or {}).get(env_id) or {}
        if "n_timesteps" in entry:
            return int(float(entry["n_timesteps"]))
    steps = zoo_hyperparameters(algo, env_id).get("n_timesteps")
    return int(float(steps)) if steps is not None else None


def remove_partial_runs(cache_dir: Path, algo: str, env_id: str) -> None:
    """Remove run folders of the pair without a saved model or checkpoint (a training killed before it saved one)."""
    for folder in run_folders(cache_dir, algo, env_id):
        if not any(folder.glob("*.zip")):
            print(f"Removing {folder}: an unfinished training run (no saved model)", file=sys.stderr)
            shutil.rmtree(folder, ignore_errors=True)


def zoo_extras(algo: str, env_id: str) -> list[str]:
    """rl-zoo3 train flags for envs it does not know: our hyperparameters file, the module registering the env."""
    from quarl_bench.config import hyperparams_file
    from quarl_bench.zoo.envs import entry_point_of
    from quarl_bench.zoo.ids import DMC_PREFIX
    from quarl_bench.zoo.robotics import is_robotics_mujoco

    extras = []
    conf = hyperparams_file(algo, env_id)
    if conf is not None:
        extras += ["--conf-file", str(conf)]
    if env_id.startswith(DMC_PREFIX):
        extras += ["--gym-packages", "quarl_bench.zoo.dmc"]
    elif is_robotics_mujoco(entry_point_of(env_id)):
        extras += ["--gym-packages", "quarl_bench.zoo.robotics_envs"]
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

    import torch
    from rl_zoo3 import exp_manager
    from rl_zoo3.exp_manager import ExperimentManager

    from quarl_bench.config import hyperparams_file
    from quarl_bench.progress import progress

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
        steps, what = manager.n_timesteps, f"training {algo} {env_id} (steps)"
        threads = torch.get_num_threads()
        torch.set_num_threads(TRAINING_THREADS)  # small policies: one thread is fastest (see TRAINING_THREADS)
        try:
            with progress(steps, what, every=steps / 10) as update:
                manager.callbacks.append(StepProgress(update))
                manager.learn(model)
        finally:
            torch.set_num_threads(threads)
        manager.save_trained_model(model)
    return Path(manager.save_path)


class StepProgress(BaseCallback):
    """Reports the training's step count to a progress ``update`` (in-process training: QAT, AMP, hardening)."""

    def __init__(self, update: Callable[..., None], every: int = 1000) -> None:
        super().__init__()
        self.update, self.every = update, every

    def _on_step(self) -> bool:
        if self.num_timesteps % self.every == 0:
            self.update(self.num_timesteps)
        return True

    def _on_training_end(self) -> None:
        self.update(self.num_timesteps)
