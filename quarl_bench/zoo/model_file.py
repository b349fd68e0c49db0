"""A policy file the user brings: an SB3 / sb3-contrib zip anywhere (``--model``), an ONNX graph (``--model
policy.onnx``) or a torch module (``--policy-module FILE.py:FUNCTION``), on any env id, custom ones included."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from quarl_bench.errors import QuarlError
from quarl_bench.types import AgentRef
from quarl_bench.zoo.algorithms import ALGORITHMS
from quarl_bench.zoo.identity import content_hash, weights_hash

BEHAVIOUR_FILES = ("config.yml", "args.yml", "env_kwargs.yml", "vecnormalize.pkl")


def algo_of_zip(data: dict[str, Any], path: Path) -> str:
    """The algorithm an SB3 zip was saved by, from its saved policy class: PPO, A2C and TRPO share ActorCriticPolicy
    (PPO saves ``clip_range``, TRPO ``cg_max_steps``), DDPG is TD3 with ``policy_delay`` 1 and no target noise clip.

    :raises QuarlError: for a zip with no SB3 data, or a policy class no supported algorithm saves.
    """
    policy_class = data.get("policy_class")
    module = policy_class.get("__module__", "") if isinstance(policy_class, dict) else ""
    savers = [a for a in ALGORITHMS.entries.values() if a.loadable and a.policy_module == module]
    if not savers:
        raise QuarlError(
            f"cannot tell which algorithm saved {str(path)!r} (policy class module {module or 'missing'!r}): "
            f"pass --algo, one of {', '.join(ALGORITHMS.names(loadable=True))}"
        )
    names = {a.name for a in savers}
    if names == {"a2c", "ppo", "trpo"}:  # one ActorCriticPolicy: TRPO saves its conjugate-gradient steps
        return "trpo" if "cg_max_steps" in data else "ppo" if "clip_range" in data else "a2c"
    if names == {"ddpg", "td3"}:
        return "ddpg" if data.get("policy_delay") == 1 and not data.get("target_noise_clip") else "td3"
    return savers[0].name


def stats_dir(zip_path: Path) -> Path:
    """rl-zoo3 saves ``{run}/{name}.zip`` beside ``{run}/{name}/`` (config.yml, vecnormalize.pkl, ...)."""
    return zip_path.with_suffix("")


def model_ref(
    model: str | os.PathLike[str],
    env_id: str,
    algo: str | None = None,
    vecnormalize: str | Path | None = None,
    env_kwargs: dict[str, Any] | None = None,
    env_packages: tuple[str, ...] = (),
) -> AgentRef:
    """The agent of a ``--model`` file: an SB3 zip (its algorithm read from it unless ``algo`` is given; the
    rl-zoo3 folder beside it used as the zoo does) or an ONNX graph. Its identity is the hash of every file that
    changes how it acts (the same hash as the zoo path gives the same zip), its source the file's path.

    :raises QuarlError: for a missing file, a file that is neither, or a bad ``--algo``/``--vecnormalize``.
    """
    from quarl_bench.zoo.sb3_zip import saved_data

    path = Path(model).expanduser().resolve()
    if not path.is_file():
        raise QuarlError(f"model file {str(model)!r} not found: expected an SB3 .zip or an .onnx file")
    kwargs, vec_text, extra = settings_identity(env_kwargs, vecnormalize)
    vec_path = Path(vec_text) if vec_text else None
    if path.suffix.lower() == ".onnx":
        from quarl_bench.extras import require

        require("deploy", "--model FILE.onnx", ("onnx", "onnxruntime"))
        from quarl_bench.zoo.onnx_chunk import sidecar_of

        if algo not in (None, "onnx"):
            raise QuarlError(f"bad --algo {algo!r} for an ONNX model: expected none (the graph acts by itself)")
        return AgentRef(
            "onnx",
            env_id,
            env_id,
            "model",
            str(path.parent),
            content_hash([path, *filter(None, [sidecar_of(path)])], extra),  # a chunk graph's sidecar acts too
            str(path),
            str(vec_path or ""),
            kwargs,
            env_packages,
        )
    data = saved_data(path)
    if not data:
        raise QuarlError(f"{str(model)!r} is not an SB3 model: expected an SB3 .zip (with its 'data' entry) or .onnx")
    if algo is not None and algo not in ALGORITHMS.names(loadable=True):
        raise QuarlError(f"unknown algo {algo!r}: expected one of {', '.join(ALGORITHMS.names(loadable=True))}")
    algo = algo or algo_of_zip(data, path)
    behaviour = [stats_dir(path) / name for name in BEHAVIOUR_FILES if not (vec_path and name == "vecnormalize.pkl")]
    content = content_hash([path, *behaviour], extra)
    return AgentRef(
        algo, env_id, env_id, "model", str(path.parent), content, str(path), str(vec_path or ""), kwargs, env_packages
    )


def module_ref(
    target: str,
    env_id: str,
    env_packages: tuple[str, ...] = (),
    env_kwargs: dict[str, Any] | None = None,
    vecnormalize: str | Path | None = None,
) -> AgentRef:
    """The agent of ``--policy-module FILE.py:FUNCTION``: hashed over the file, the weights it builds and the env
    kwargs and VecNormalize statistics it plays with (``--env-kwargs``, ``--vecnormalize``)."""
    from quarl_bench.zoo.foreign import load_module_function

    kwargs, vec_path, extra = settings_identity(env_kwargs, vecnormalize)
    module = load_module_function(target)
    path_text, _, function = target.rpartition(":")
    path = Path(path_text).resolve()
    key = weights_hash(module.state_dict(), path.read_bytes() + target.encode() + extra.encode())
    return AgentRef(
        "torch-module",
        env_id,
        env_id,
        "module",
        str(path.parent),
        key,
        f"{path}:{function}",
        vec_path,
        kwargs,
        env_packages,
    )


def settings_identity(env_kwargs: dict[str, Any] | None, vecnormalize: str | Path | None) -> tuple[str, str, str]:
    """``--env-kwargs`` as JSON, the ``--vecnormalize`` file's absolute path, and the text an agent's identity hashes
    them as ('' for each one not given: a policy's hash without them is unchanged).

    :raises QuarlError: for a VecNormalize file that does not exist.
    """
    vec_path = Path(vecnormalize).expanduser().resolve() if vecnormalize else None
    if vec_path is not None and not vec_path.is_file():
        raise QuarlError(f"vecnormalize file {str(vecnormalize)!r} not found: expected a VecNormalize .pkl file")
    kwargs = json.dumps(env_kwargs, sort_keys=True) if env_kwargs else ""
    extra = kwargs + (f"vecnormalize:{content_hash([vec_path])}" if vec_path else "")
    return kwargs, str(vec_path or ""), extra


def saved_config(stats_folder: Path) -> dict[str, Any]:
    """The parent's rl-zoo3 ``config.yml`` as a dict (empty when it has none)."""
    import yaml

    path = stats_folder / "config.yml"
    if not path.is_file():
        return {}
    loaded = yaml.load(path.read_text(), Loader=yaml.UnsafeLoader)  # rl-zoo3 writes an OrderedDict
    return dict(loaded or {})
