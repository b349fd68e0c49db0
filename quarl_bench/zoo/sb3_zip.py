"""What an SB3 zip says about itself, read from its ``data`` entry without loading the model (no torch): the leaf
both the zoo's agent loader and a user's ``--model`` file read."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any


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


def saved_action_space(zip_path: Path) -> str | None:
    """The action space an SB3 zip was saved with, as :func:`action_text` writes it (None if unreadable)."""
    space = saved_data(zip_path).get("action_space")
    if not isinstance(space, dict):
        return None
    if isinstance(space.get("n"), int | str) and str(space["n"]).isdigit():
        return f"Discrete({int(space['n'])})"
    shape = space.get("_shape", space.get("shape"))
    return (
        f"Box{tuple(int(n) for n in shape)}" if isinstance(shape, list) and "Box" in str(space.get(":type:")) else None
    )
