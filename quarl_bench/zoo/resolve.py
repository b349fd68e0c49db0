"""The one agent resolver: an :class:`AgentQuery` (a zoo id, a policy file, a torch module, an in-memory model) to a
loadable :class:`~quarl_bench.types.AgentRef`. The CLI, sweeps and grids, and the Python API all resolve here, and
every source names its agent by the one content hash (``zoo/identity.py``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from quarl_bench.errors import QuarlError
from quarl_bench.types import AgentRef


@dataclass(frozen=True)
class AgentQuery:
    """Where one agent comes from: the zoo (``algo``), a policy file (``model``: SB3 zip or ONNX) or a torch module
    (``policy_module``: ``FILE.py:FUNCTION``), on ``env`` (an id, an alias or ``module:EnvId-v0``).

    :param vecnormalize: normalisation statistics for a ``model`` zip.
    :param env_kwargs: keyword arguments for the env (override the saved ones).
    :param env_packages: modules imported before the env is made.
    :param folder: rl-zoo3 log folder (default ``$QUARL_ZOO``); ``cache``: trained and downloaded agents.

    ``model`` may also be a loaded SB3 model or a ``torch.nn.Module`` (its identity: the hash of its weights).
    """

    env: str
    algo: str | None = None
    model: Any = None
    policy_module: str | None = None
    vecnormalize: str | None = None
    env_kwargs: dict[str, Any] | None = None
    env_packages: tuple[str, ...] = ()
    folder: str | None = None
    cache: str | None = None
    use_hub: bool = True
    train_if_missing: bool = False
    seed: int = 0
    trust_remote_code: bool = False


def resolve(query: AgentQuery) -> AgentRef:
    """Resolve a query to a loadable agent: a policy file or module, an in-memory model, or the zoo agent of
    ``algo`` found in ``folder`` (or ``$QUARL_ZOO``), the cache, the hub, or trained.

    :raises QuarlError: for a bad env, package, file or missing agent, in one line.
    """
    from quarl_bench.zoo.agents import DEFAULT_CACHE, resolve_agent
    from quarl_bench.zoo.envs import env_with_packages
    from quarl_bench.zoo.model_file import model_ref, module_ref

    if query.model is not None and query.policy_module:
        raise QuarlError("bad agent: expected --model or --policy-module, not both")
    env_id, packages = env_with_packages(query.env, query.env_packages)
    if query.model is not None and not isinstance(query.model, str | os.PathLike):
        cache = Path(query.cache or DEFAULT_CACHE)
        return object_ref(query.model, env_id, packages, cache, query.env_kwargs, query.vecnormalize)
    if query.model:
        return model_ref(query.model, env_id, query.algo, query.vecnormalize, query.env_kwargs, packages)
    if query.policy_module:
        return module_ref(query.policy_module, env_id, packages, query.env_kwargs, query.vecnormalize)
    if query.vecnormalize or query.env_kwargs:
        flag = "--vecnormalize" if query.vecnormalize else "--env-kwargs"
        raise QuarlError(
            f"bad agent: {flag} applies to a --model file, a --policy-module or a model object; a zoo agent "
            "(--algo) plays with the env settings and statistics saved beside it"
        )
    if not query.algo:
        raise QuarlError("no agent given: expected --algo (a zoo agent), --model FILE or --policy-module FILE.py:FUNC")
    ref = resolve_agent(
        query.algo,
        env_id,
        query.folder,
        query.cache or DEFAULT_CACHE,
        query.use_hub,
        query.train_if_missing,
        query.seed,
        query.trust_remote_code,
    )
    # --env-package reaches a zoo agent too: every process that makes its env (workers, Ray) imports them first
    return replace(ref, env_packages=packages) if packages else ref


def object_ref(
    model: Any,
    env_id: str,
    packages: tuple[str, ...],
    cache: Path,
    env_kwargs: dict[str, Any] | None = None,
    vecnormalize: str | None = None,
) -> AgentRef:
    """An in-memory SB3 model (saved once to ``cache/objects/{hash}.zip``) or torch module (kept in this process)
    as an agent; its identity is the hash of its weights (and of the env kwargs and statistics it plays with)."""
    import torch
    from stable_baselines3.common.base_class import BaseAlgorithm

    from quarl_bench.zoo.foreign import register_module
    from quarl_bench.zoo.identity import weights_hash
    from quarl_bench.zoo.model_file import algo_of_zip, model_ref
    from quarl_bench.zoo.sb3_zip import saved_data

    if isinstance(model, BaseAlgorithm):
        state = model.policy.state_dict()
    elif isinstance(model, torch.nn.Module):
        state = model.state_dict()
    else:
        raise QuarlError(
            f"bad model {type(model).__name__}: expected a path (.zip or .onnx), an SB3 model or a torch.nn.Module"
        )
    key = weights_hash(state, type(model).__qualname__.encode())
    if isinstance(model, torch.nn.Module):
        from quarl_bench.zoo.model_file import settings_identity

        kwargs, vec_path, extra = settings_identity(env_kwargs, vecnormalize)
        key = weights_hash(state, type(model).__qualname__.encode() + extra.encode())
        return AgentRef(
            "torch-module", env_id, env_id, "object", "", key, register_module(key, model), vec_path, kwargs, packages
        )
    path = cache / "objects" / f"{key}.zip"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{key}.partial.zip")
        model.save(partial)
        os.replace(partial, path)
    return model_ref(path, env_id, algo_of_zip(saved_data(path), path), vecnormalize, env_kwargs, packages)
