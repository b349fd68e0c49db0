"""Read the data files in ``zoo_configs/`` (env aliases, legacy ids, per-env evaluation settings)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CONFIG_DIR_ENV = "QUARL_CONFIGS"


def config_dir() -> Path:
    """``$QUARL_CONFIGS`` or the repository's ``zoo_configs/`` (the package is installed editable)."""
    override = os.environ.get(CONFIG_DIR_ENV)
    return Path(override) if override else Path(__file__).resolve().parents[1] / "zoo_configs"


@cache
def load_yaml(name: str) -> dict[str, Any]:
    """One YAML file of the config folder as a dict."""
    with open(config_dir() / name) as handle:
        return yaml.safe_load(handle) or {}


def env_settings() -> dict[str, Any]:
    return load_yaml("envs.yaml")
