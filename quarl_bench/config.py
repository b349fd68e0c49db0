"""Read the data files in ``zoo_configs/`` (env aliases, legacy ids, per-env evaluation settings, grids, the papers'
numbers): package data, so an installed wheel has them too (the repository's ``zoo_configs`` links to them)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CONFIG_DIR_ENV = "QUARL_CONFIGS"


def config_dir() -> Path:
    """``$QUARL_CONFIGS`` or the package's ``zoo_configs/``."""
    override = os.environ.get(CONFIG_DIR_ENV)
    return Path(override) if override else Path(__file__).resolve().parent / "zoo_configs"


def grid_file(name: str | Path) -> Path:
    """A grid given as a path relative to the current folder, or by the name of one shipped in ``zoo_configs``
    (``smoke``, ``sweetspot.yaml``, or ``zoo_configs/smoke.yaml`` as the docs write it, from any folder)."""
    path = Path(name)
    if path.is_file() or path.parent not in (Path("."), Path("zoo_configs")):
        return path
    shipped = config_dir() / (path.name if path.suffix else f"{path.name}.yaml")
    return shipped if shipped.is_file() else path


def missing_grid(what: str, path: Path) -> str:
    """One line for a grid that is neither a file nor a shipped name: the shipped names a user can type."""
    names = ", ".join(sorted(p.stem for p in config_dir().glob("*.yaml") if p.stem != "envs"))
    return f"{what} {str(path)!r} not found: expected a YAML file, or the name of a shipped grid ({names})"


@cache
def load_yaml(name: str) -> dict[str, Any]:
    """One YAML file of the config folder as a dict."""
    with open(config_dir() / name) as handle:
        return yaml.safe_load(handle) or {}


def env_settings() -> dict[str, Any]:
    return load_yaml("envs.yaml")


def alias_env_id(name: str) -> str:
    """The env id an alias or legacy id stands for (``Breakout`` -> ``BreakoutNoFrameskip-v4``), from
    ``envs.yaml`` alone: no env package is imported and the id is not checked (the report reads paper names)."""
    settings = env_settings()
    env_id = settings["aliases"].get(name, name)
    return settings["legacy_ids"].get(env_id, env_id)


def zoo_hyperparameters(algo: str, env_id: str) -> dict[str, Any]:
    """The raw hyperparameter entry for algo/env, as its YAML writes it: ``zoo_configs/hyperparams/{algo}.yml`` where
    it has the env (for D4PG, which rl-zoo3 lacks, its ``default`` otherwise), else rl-zoo3's, else {} (SB3's)."""
    import rl_zoo3

    if algo == "d4pg":
        path = config_dir() / "hyperparams" / "d4pg.yml"
    else:
        path = hyperparams_file(algo, env_id) or Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml"
    table = yaml.safe_load(path.read_text()) or {}
    return dict(table.get(env_id, table.get("default", {}) if algo == "d4pg" else {}) or {})


def hyperparams_file(algo: str, env_id: str) -> Path | None:
    """``zoo_configs/hyperparams/{algo}.yml`` when it has settings for ``env_id`` (envs rl-zoo3 has none for, such
    as the Control Suite's), else None: rl-zoo3's own table applies."""
    path = config_dir() / "hyperparams" / f"{algo}.yml"
    if not path.is_file():
        return None
    return path if env_id in load_yaml(f"hyperparams/{algo}.yml") else None
