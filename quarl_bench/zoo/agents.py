"""Find an agent (zoo folder, local cache, hub, training) and load it as rl-zoo3's ``enjoy`` does."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.vec_env import VecTransposeImage

from quarl_bench.errors import QuarlError
from quarl_bench.types import ALGOS, AgentRef, file_name
from quarl_bench.zoo.envs import gym_pickle_alias, make_eval_env, resolve_env_id, saved_env_ids

ZOO_ENV = "QUARL_ZOO"
DEFAULT_CACHE = Path("results/agents")
OFF_POLICY = ("dqn", "qrdqn", "ddpg", "td3", "sac", "tqc")


@dataclass
class LoadedAgent:
    """An SB3 model with everything needed to rebuild its evaluation env."""

    ref: AgentRef
    model: BaseAlgorithm
    hyperparams: dict[str, Any]
    stats_path: str | None
    env_kwargs: dict[str, Any]

    def make_env(self, n_envs: int, seed: int):
        """The agent's evaluation envs, env ``i`` seeded ``seed + i``."""
        return make_eval_env(self.ref.env_id, self.hyperparams, self.stats_path, self.env_kwargs, n_envs, seed)


def check_algo(algo: str) -> str:
    if algo not in ALGOS:
        raise QuarlError(f"unknown algo {algo!r}: expected one of {', '.join(ALGOS)}")
    return algo


def find_in_folder(folder: Path, algo: str, env_id: str, source: str) -> AgentRef | None:
    """The agent for ``algo``/``env_id`` in an rl-zoo3 log folder (latest run id), or None."""
    for saved_id in saved_env_ids(env_id):
        name = file_name(saved_id)
        runs = sorted(
            (p for p in (folder / algo).glob(f"{name}_*") if p.name.removeprefix(name + "_").isdigit()),
            key=lambda p: int(p.name.rsplit("_", 1)[1]),
        )
        for run_dir in reversed(runs):
            if (run_dir / f"{name}.zip").is_file():
                return AgentRef(algo, env_id, saved_id, source, str(run_dir), content_hash(run_dir, name))
    return None


BEHAVIOUR_FILES = ("config.yml", "args.yml", "env_kwargs.yml", "vecnormalize.pkl")


def content_hash(run_dir: Path, saved_name: str) -> str:
    """sha256 over the model zip and every saved file that changes how it is evaluated (``BEHAVIOUR_FILES``)."""
    digest = hashlib.sha256()
    for path in [run_dir / f"{saved_name}.zip", *(run_dir / saved_name / n for n in BEHAVIOUR_FILES)]:
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def resolve_agent(
    algo: str,
    env: str,
    folder: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike = DEFAULT_CACHE,
    use_hub: bool = True,
    train_if_missing: bool = False,
    seed: int = 0,
    trust_remote_code: bool = False,
) -> AgentRef:
    """Find the agent in this order: ``folder`` (or ``$QUARL_ZOO``), the cache, the hub, training.

    :raises QuarlError: when no source has it, naming where it looked.
    """
    from quarl_bench.zoo import hub, train

    check_algo(algo)
    env_id = resolve_env_id(env)
    folder = folder or os.environ.get(ZOO_ENV)
    looked: list[str] = []
    if folder:
        if not Path(folder).is_dir():
            raise QuarlError(f"zoo folder {str(folder)!r} does not exist: expected an rl-zoo3 log folder")
        ref = find_in_folder(Path(folder), algo, env_id, "folder")
        if ref:
            return ref
        looked.append(f"{folder}/{algo}/{env_id}_*/{env_id}.zip")
    cache_dir = Path(cache_dir)
    ref = find_in_folder(cache_dir, algo, env_id, "cache")
    if ref:
        return ref
    looked.append(f"cache {cache_dir}")
    hub_error = ""
    if use_hub:
        try:
            hub.download(algo, env_id, cache_dir, trust_remote_code)
            ref = find_in_folder(cache_dir, algo, env_id, "hub")
            if ref:
                return ref
        except QuarlError as error:
            hub_error = f" ({error})"
        looked.append(f"hub sb3/{algo}-{env_id}{hub_error}")
    if train_if_missing:
        train.train_baseline(algo, env_id, cache_dir, seed)
        ref = find_in_folder(cache_dir, algo, env_id, "trained")
        if ref:
            return ref
    raise QuarlError(
        f"no {algo} agent for {env_id}: looked in {'; '.join(looked)}; pass --folder DIR or --train-if-missing"
    )


def load_agent(ref: AgentRef) -> LoadedAgent:
    """Load the model and its saved hyperparameters; old (2021, ``gym``-pickled) zips included.

    :raises QuarlError: for a corrupt zip or unreadable normalisation stats.
    """
    from rl_zoo3 import ALGOS as ZOO_ALGOS
    from rl_zoo3.utils import get_saved_hyperparams

    run_dir = Path(ref.run_dir)
    zip_path = run_dir / f"{ref.saved_name}.zip"
    hyperparams, stats_path = get_saved_hyperparams(str(run_dir / ref.saved_name), norm_reward=False, test_mode=True)
    env_kwargs = saved_env_kwargs(run_dir / ref.saved_name, hyperparams)
    check_normalization_stats(run_dir / ref.saved_name / "vecnormalize.pkl")
    check_observation_layout(ref)
    try:
        probe = make_eval_env(ref.env_id, hyperparams, stats_path, env_kwargs, n_envs=1, seed=0)
    except Exception as error:  # unpickling and shape errors come in many types
        raise QuarlError(f"cannot build the {ref.env_id} env from {stats_path}: {one_line(error)}") from error
    observation_space, action_space = probe.observation_space, probe.action_space
    probe.close()
    if is_image_space(observation_space) and not is_image_space_channels_first(observation_space):
        observation_space = VecTransposeImage.transpose_space(observation_space)  # SB3 trains channel-first
    saved_shape = saved_observation_shape(zip_path)
    if saved_shape is not None and saved_shape != tuple(observation_space.shape or ()):
        raise QuarlError(
            f"agent {zip_path} was saved for observations of shape {saved_shape}, but {ref.env_id} with "
            f"its wrappers gives {tuple(observation_space.shape or ())}: expected an agent for this env"
        )
    custom_objects = {
        "observation_space": observation_space,
        "action_space": action_space,
        "learning_rate": 0.0,
        "lr_schedule": lambda _: 0.0,
        "clip_range": lambda _: 0.0,
        "exploration_schedule": lambda _: 0.0,
    }
    kwargs: dict[str, Any] = {"buffer_size": 1} if ref.algo in OFF_POLICY else {}
    if "optimize_memory_usage" in hyperparams:
        kwargs["optimize_memory_usage"] = False
    try:
        with warnings.catch_warnings():
            # SB3 >= 2.4 warns (harmlessly) that it truncated the optimizer state of old DQN zips.
            warnings.filterwarnings("ignore", message="You are probably loading a DQN model")
            model = ZOO_ALGOS[ref.algo].load(str(zip_path), custom_objects=custom_objects, device="cpu", **kwargs)
    except (zipfile.BadZipFile, KeyError, ValueError, RuntimeError, EOFError) as error:
        raise QuarlError(f"cannot load agent {zip_path}: {one_line(error)}; expected an SB3 model zip") from error
    return LoadedAgent(ref, model, hyperparams, stats_path, env_kwargs)


def check_observation_layout(ref: AgentRef) -> None:
    """Refuse an agent saved on an id whose observations differ on the env it now runs on (Ant-v3 on Ant-v4).

    :raises QuarlError: naming the agent, both ids and what changed (``changed_layouts`` in ``zoo_configs/envs.yaml``).
    """
    from quarl_bench.config import env_settings

    reason = env_settings().get("changed_layouts", {}).get(ref.saved_env_id)
    if reason and ref.saved_env_id != ref.env_id:
        raise QuarlError(
            f"agent {ref.algo}/{ref.saved_env_id} cannot run on {ref.env_id}: {' '.join(reason.split())}; "
            f"expected an agent saved for {ref.env_id}"
        )


def saved_data(zip_path: Path) -> dict[str, Any]:
    """An SB3 zip's ``data`` JSON (its saved attributes), read without loading the model; {} if unreadable."""
    try:
        with zipfile.ZipFile(zip_path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return {}
    return data if isinstance(data, dict) else {}


def saved_observation_shape(zip_path: Path) -> tuple[int, ...] | None:
    """The observation shape an SB3 zip was saved with."""
    space = saved_data(zip_path).get("observation_space")
    shape = space.get("_shape", space.get("shape")) if isinstance(space, dict) else None
    return tuple(int(n) for n in shape) if isinstance(shape, list) else None


def saved_exploration_rate(ref: AgentRef) -> float | None:
    """The exploration rate a DQN/QR-DQN zip was saved with (its final epsilon)."""
    value = saved_data(Path(ref.run_dir) / f"{ref.saved_name}.zip").get("exploration_rate")
    return float(value) if isinstance(value, int | float) else None


def check_normalization_stats(path: Path) -> None:
    """Fail early, naming the file, if ``vecnormalize.pkl`` exists but cannot be unpickled."""
    if not path.is_file():
        return
    try:
        with gym_pickle_alias(), open(path, "rb") as handle:
            pickle.load(handle)
    except Exception as error:  # a corrupt pickle raises almost any type
        raise QuarlError(
            f"unreadable normalization stats {path}: {one_line(error)}; expected a VecNormalize pickle"
        ) from error


def saved_env_kwargs(stats_dir: Path, hyperparams: dict[str, Any]) -> dict[str, Any]:
    """Env kwargs from ``config.yml`` overridden by ``args.yml``, as rl-zoo3's ``enjoy`` reads them."""
    env_kwargs = dict(hyperparams.pop("env_kwargs", None) or {})
    args_path = stats_dir / "args.yml"
    if args_path.is_file():
        with open(args_path) as handle:
            saved_args = yaml.load(handle, Loader=yaml.UnsafeLoader) or {}
        env_kwargs = saved_args.get("env_kwargs") or env_kwargs
    return env_kwargs


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"
