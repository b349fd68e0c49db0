"""An agent as a person knows it, for every table and console line: the zoo id or the policy file's path, the env
kwargs it runs with, and a short content hash (two agents never share a name; the hash alone says nothing)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ZOO_SOURCES = ("folder", "cache", "hub", "trained")


def agent_name(
    algo: str, env_id: str, source: str, path: str, agent_hash: str, env_kwargs: str | dict[str, Any] = ""
) -> str:
    """``ppo/CartPole-v1 #f8add185``, ``my_agent.zip (max_steps:200) #829032ba``, ``policy.py:make_actor #...``.

    :param source: where the agent came from (``folder``, ``cache``, ``hub``, ``trained``, ``model``, ``module``
        or ``object``).
    :param path: the policy file (``--model``, ``--policy-module``), shown relative to the current folder when it
        lies inside it.
    :param env_kwargs: ``--env-kwargs`` as a dict or its JSON text.
    """
    if source in ZOO_SOURCES or not path:
        what = f"{algo}/{env_id}"
    elif source == "object":
        what = "torch module" if algo == "torch-module" else f"{algo} model object"
    else:
        what = readable_path(path)
    kwargs = json.loads(env_kwargs) if isinstance(env_kwargs, str) and env_kwargs else env_kwargs or {}
    settings = f" ({' '.join(f'{key}:{value!r}' for key, value in sorted(kwargs.items()))})" if kwargs else ""
    return f"{what}{settings} #{str(agent_hash)[:8]}"


def readable_path(path: str) -> str:
    """``path`` relative to the current folder when inside it, else as stored (a ``FILE.py:FUNCTION`` keeps its
    function)."""
    file_part, colon, function = path, "", ""
    if ":" in path and not Path(path).exists():
        file_part, colon, function = path.rpartition(":")
    try:
        shown = str(Path(file_part).resolve().relative_to(Path(os.getcwd()).resolve()))
    except ValueError:
        shown = file_part
    return f"{shown}{colon}{function}"


def row_agent_name(row: Any) -> str:
    """:func:`agent_name` of a stored results row (its columns and provenance)."""
    provenance = row["provenance"] if isinstance(row["provenance"], dict) else {}
    return agent_name(
        row["algo"],
        row["env_id"],
        row["agent_source"],
        row["agent_path"],
        row["agent_hash"],
        provenance.get("env_kwargs", ""),
    )


def name_of(row: Any) -> str:
    """A row's ``agent`` name where the frame carries one (every store frame does), else its short hash."""
    name = row.get("agent") if hasattr(row, "get") else None
    return str(name) if isinstance(name, str) and name else str(row["agent_hash"])[:8]


def ref_title(ref: Any) -> str:
    """A resolved agent (``AgentRef``) for titles and the ``Agent:`` line: its name, and what the name leaves out
    (where a zoo agent came from; the algo and env of a file)."""
    name = agent_name(ref.algo, ref.env_id, ref.source, ref.model_path, ref.content_hash, ref.env_kwargs)
    return f"{name} ({ref.source})" if ref.source in ZOO_SOURCES else f"{name} ({ref.algo} on {ref.env_id})"
