"""Agents for the application layer: the one resolver (``zoo/resolve.py``), an agent's acting layers, and env
factories registered under ids of their own."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from quarl_bench.types import AgentRef
from quarl_bench.zoo.resolve import AgentQuery, resolve

__all__ = ["AgentQuery", "acting_layer_names", "code_identity", "factory_env_id", "resolve"]


def acting_layer_names(ref: AgentRef) -> list[str]:
    """The agent's acting layers (what per-layer precisions refer to), in module order."""
    from quarl_bench.quant.quantize import acting_layer_names as names
    from quarl_bench.zoo.forms import load_agent

    return names(load_agent(ref).model.policy)


def factory_env_id(env: Callable[[], Any]) -> str:
    """Register an env factory under a gymnasium id of its own (so the evaluation, like rl-zoo3, makes it by id):
    ``factory/{the id of the env it makes}-{hash of its code}-v0``, the same in every process (a lambda's repr
    holds its address), and named after the env a person asked for."""
    import re

    import gymnasium as gym

    probe = env()
    made = probe.spec.id if probe.spec is not None else type(probe.unwrapped).__name__
    probe.close()
    digest = hashlib.sha256(code_identity(env)).hexdigest()[:8]
    env_id = f"factory/{re.sub(r'[^A-Za-z0-9_.-]', '_', made)}-{digest}-v0"
    if env_id not in gym.registry:

        def make(**_kwargs: Any) -> gym.Env:  # the factory takes no settings: none are registered with it
            return env()

        gym.register(env_id, entry_point=make)
    return env_id


def code_identity(function: Any) -> bytes:
    """What a factory does, as bytes: its module, name, bytecode and constants (nested code objects by theirs)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return repr(type(function)).encode()

    def of(code_object: Any) -> bytes:
        parts = [code_object.co_code, repr(code_object.co_names).encode()]
        for constant in code_object.co_consts:
            parts.append(of(constant) if hasattr(constant, "co_code") else repr(constant).encode())
        return b"|".join(parts)

    return f"{function.__module__}.{function.__qualname__}".encode() + of(code)
