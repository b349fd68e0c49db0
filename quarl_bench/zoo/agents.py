"""Find an agent (zoo folder, local cache, hub, training) and load it as rl-zoo3's ``enjoy`` does."""

from __future__ import annotations

import json
import os
import pickle
import sys
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
from quarl_bench.types import AgentRef, file_name
from quarl_bench.zoo.algorithms import OFF_POLICY, algorithm, check_algo
from quarl_bench.zoo.envs import gym_pickle_alias, make_eval_env, resolve_env_id, saved_env_ids
from quarl_bench.zoo.identity import content_hash
from quarl_bench.zoo.model_file import BEHAVIOUR_FILES, stats_dir
from quarl_bench.zoo.sb3_zip import saved_action_space, saved_data, saved_observation_shape

ZOO_ENV = "QUARL_ZOO"
DEFAULT_CACHE = Path("results/agents")


@dataclass
class PolicyOnly:
    """What a torch-module or ONNX agent has of an SB3 model: its policy."""

    policy: Any


@dataclass
class LoadedAgent:
    """An SB3 model (or a :class:`PolicyOnly`) with everything needed to rebuild its evaluation env."""

    ref: AgentRef
    model: BaseAlgorithm | PolicyOnly
    hyperparams: dict[str, Any]
    stats_path: str | None
    env_kwargs: dict[str, Any]

    def make_env(self, n_envs: int, seed: int):
        """The agent's evaluation envs, env ``i`` seeded ``seed + i`` (normalised by ``--vecnormalize`` if given)."""
        env = make_eval_env(self.ref.env_id, self.hyperparams, self.stats_path, self.env_kwargs, n_envs, seed)
        if self.ref.vecnormalize:
            from stable_baselines3.common.vec_env import VecNormalize

            with gym_pickle_alias():
                env = VecNormalize.load(self.ref.vecnormalize, env)
            env.training, env.norm_reward = False, False
        return env


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
                return AgentRef(algo, env_id, saved_id, source, str(run_dir), zoo_content_hash(run_dir, name))
    return None


def zoo_content_hash(run_dir: Path, saved_name: str) -> str:
    """The content hash of a zoo-layout agent: its zip and every saved file that changes how it is evaluated
    (``BEHAVIOUR_FILES``), as ``--model`` hashes the same zip."""
    return content_hash([run_dir / f"{saved_name}.zip", *(run_dir / saved_name / n for n in BEHAVIOUR_FILES)])


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


def load_sb3_agent(ref: AgentRef) -> LoadedAgent:
    """An SB3 zip with its saved hyperparameters and normalisation stats (the SB3 form's loader)."""
    from rl_zoo3.utils import get_saved_hyperparams

    zip_path = Path(ref.model_path) if ref.model_path else Path(ref.run_dir) / f"{ref.saved_name}.zip"
    hyperparams, stats_path = get_saved_hyperparams(str(stats_dir(zip_path)), norm_reward=False, test_mode=True)
    env_kwargs = saved_env_kwargs(stats_dir(zip_path), hyperparams) | (json.loads(ref.env_kwargs or "{}"))
    check_normalization_stats(stats_dir(zip_path) / "vecnormalize.pkl")
    if ref.vecnormalize:
        check_normalization_stats(Path(ref.vecnormalize))
    check_observation_layout(ref)
    loaded = LoadedAgent(ref, PolicyOnly(None), hyperparams, stats_path, env_kwargs)
    observation_space, action_space = probe_spaces(loaded)
    if is_image_space(observation_space) and not is_image_space_channels_first(observation_space):
        observation_space = VecTransposeImage.transpose_space(observation_space)  # SB3 trains channel-first
    saved_shape = saved_observation_shape(zip_path)
    if saved_shape is not None and saved_shape != tuple(observation_space.shape or ()):
        raise QuarlError(
            f"agent {zip_path} was saved for observations of shape {saved_shape}, but {ref.env_id} with "
            f"its wrappers gives {tuple(observation_space.shape or ())}: expected an agent for this env"
        )
    saved_actions = saved_action_space(zip_path)
    if saved_actions is not None and saved_actions != action_text(action_space):
        raise QuarlError(
            f"agent {zip_path} was saved for actions {saved_actions}, but {ref.env_id} has {action_text(action_space)}:"
            " expected an agent for this env"
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
    if ref.algo in OFF_POLICY:  # a HER buffer needs the training env to be built: evaluation needs no buffer
        kwargs |= {"replay_buffer_class": None, "replay_buffer_kwargs": {}}
    if "optimize_memory_usage" in hyperparams:
        kwargs["optimize_memory_usage"] = False
    try:
        with warnings.catch_warnings():
            # SB3 >= 2.4 warns (harmlessly) that it truncated the optimizer state of old DQN zips.
            warnings.filterwarnings("ignore", message="You are probably loading a DQN model")
            model = (
                algorithm(ref.algo)
                .model_type()
                .load(str(zip_path), custom_objects=custom_objects, device="cpu", **kwargs)
            )
    except (zipfile.BadZipFile, KeyError, ValueError, RuntimeError, EOFError) as error:
        raise QuarlError(f"cannot load agent {zip_path}: {one_line(error)}; expected an SB3 model zip") from error
    loaded.model = model
    return loaded


def probe_spaces(agent: LoadedAgent):
    """The observation and action spaces of the agent's evaluation env, as the policy sees them.

    :raises QuarlError: when the env cannot be built (``--vecnormalize`` stats for another observation size
        included: SB3's ``VecNormalize.load`` names both shapes).
    """
    try:
        probe = agent.make_env(1, 0)
    except QuarlError:
        raise
    except Exception as error:  # unpickling and shape errors come in many types
        where = agent.ref.vecnormalize or agent.stats_path or "its settings"
        raise QuarlError(f"cannot build the {agent.ref.env_id} env from {where}: {one_line(error)}") from error
    observation_space, action_space = probe.observation_space, probe.action_space
    probe.close()
    return observation_space, action_space


_ANNOUNCED: set[str] = set()  # action-output policies already announced in this process


def load_foreign(ref: AgentRef, make_policy: Any = None) -> LoadedAgent:
    """A torch-module or ONNX agent: the policy on the env's spaces (``make_policy(ref, observation_space,
    action_space)``, its form's: :func:`module_policy` or :func:`graph_policy`), its output shape checked."""
    from quarl_bench.zoo.foreign import check_output

    agent = LoadedAgent(ref, PolicyOnly(None), {}, None, json.loads(ref.env_kwargs or "{}"))
    observation_space, action_space = probe_spaces(agent)
    policy = (make_policy or module_policy)(ref, observation_space, action_space)
    check_output(policy, ref.model_path)
    if policy.outputs_actions and ref.model_path not in _ANNOUNCED:
        _ANNOUNCED.add(ref.model_path)
        print(
            f"quarl-bench: {ref.model_path} outputs actions, not logits: played greedy; decision margins and the "
            "near-tie split are not measured",
            file=sys.stderr,
        )
    policy.set_training_mode(False)
    agent.model = PolicyOnly(policy)
    return agent


def module_policy(ref: AgentRef, observation_space: Any, action_space: Any) -> Any:
    """A ``--policy-module FILE.py:FN``'s module as an SB3 policy."""
    from quarl_bench.zoo.chunk_policies import chunked_policy, declared_chunk
    from quarl_bench.zoo.foreign import UserModulePolicy, load_module_function

    module = load_module_function(ref.model_path)
    chunk = declared_chunk(module, ref.model_path)
    if chunk is not None:
        return chunked_policy(observation_space, action_space, module, chunk)
    return UserModulePolicy(observation_space, action_space, module)


def graph_policy(ref: AgentRef, observation_space: Any, action_space: Any) -> Any:
    """An ONNX graph as an SB3 policy: its torch twin where it is one MLP chain (every method a torch module takes
    then takes it), else the graph itself on ONNX Runtime."""
    from quarl_bench.zoo.foreign import UserModulePolicy, UserOnnxPolicy, chain_reading
    from quarl_bench.zoo.onnx_chunk import onnx_chunk_policy, sidecar_of

    graph = Path(ref.model_path).read_bytes()
    sidecar = sidecar_of(ref.model_path)
    if sidecar is not None:  # a chunk or denoising graph: the loop around it (zoo/onnx_chunk.py)
        return onnx_chunk_policy(graph, sidecar, observation_space, action_space)
    announce_outputs(ref.model_path, graph)
    reading = chain_reading(graph, action_space)
    if reading.module is not None:
        return UserModulePolicy(observation_space, action_space, reading.module)
    return UserOnnxPolicy(observation_space, action_space, graph, not_a_chain=reading.reason)


def announce_outputs(path: str, graph: bytes) -> None:
    """Say, once per file, which output of a several-output graph is played: the first (SB3's recipe puts actions,
    values and log-probabilities side by side)."""
    import onnx

    outputs = [output.name for output in onnx.load_from_string(graph).graph.output]
    if len(outputs) > 1 and f"outputs:{path}" not in _ANNOUNCED:
        _ANNOUNCED.add(f"outputs:{path}")
        print(
            f"quarl-bench: {path} has {len(outputs)} outputs ({', '.join(outputs)}): the first, {outputs[0]!r}, is "
            "played as the policy's logits or actions; put that output first if it is another",
            file=sys.stderr,
        )


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


def action_text(space) -> str:
    """``Discrete(4)`` or ``Box(6,)``: the part of an action space a policy's output depends on."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return f"Discrete({int(space.n)})"
    return f"{type(space).__name__}{tuple(space.shape or ())}"


def zip_path_of(ref: AgentRef) -> Path:
    return Path(ref.model_path) if ref.model_path else Path(ref.run_dir) / f"{ref.saved_name}.zip"


def saved_exploration_rate(ref: AgentRef) -> float | None:
    """The exploration rate a DQN/QR-DQN zip was saved with (its final epsilon)."""
    value = saved_data(zip_path_of(ref)).get("exploration_rate")
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
