"""YAML job grids (``zoo_configs/*.yaml``) expanded into grid cells: algo x env x precision x seed."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import yaml

from quarl_bench.errors import QuarlError
from quarl_bench.types import ALGOS, METHODS, parse_precision
from quarl_bench.zoo.envs import resolve_env_id


@dataclass(frozen=True)
class GridCell:
    """One job of a study before its agent is resolved (the agent's content hash completes the Job)."""

    algo: str
    env_id: str
    precision: str
    seed: int  # evaluation seed for ptq; training seed for qat (evaluated on seed 0)
    episodes: int
    method: str = "ptq"
    quant_delay: int | None = None  # qat only; None = half the training steps
    n_timesteps: int | None = None  # qat only; None = rl-zoo3's budget


@dataclass(frozen=True)
class Study:
    name: str
    cells: tuple[GridCell, ...]


def load_study(path: str | Path) -> Study:
    """Read a grid file: ``name``, ``episodes``, ``seeds`` and ``grid`` blocks of algos x envs x precisions.

    :raises QuarlError: for a missing file or a bad algo, env or precision in it.
    """
    path = Path(path)
    if not path.is_file():
        raise QuarlError(f"grid file {str(path)!r} not found: expected a YAML file such as zoo_configs/smoke.yaml")
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    episodes = int(data.get("episodes", 100))
    seeds = [int(s) for s in data.get("seeds", [0])]
    method = str(data.get("method", "ptq"))
    if method not in METHODS:
        raise QuarlError(f"bad method {method!r} in {path}: expected one of {', '.join(METHODS)}")
    cells: list[GridCell] = []
    for block in data.get("grid", []):
        for algo in block["algos"]:
            if algo not in ALGOS:
                raise QuarlError(f"bad algo {algo!r} in {path}: expected one of {', '.join(ALGOS)}")
        envs = [resolve_env_id(str(env)) for env in block["envs"]]
        precisions = [parse_precision(p) for p in block["precisions"]]
        for algo, env_id, precision, seed in itertools.product(block["algos"], envs, precisions, seeds):
            cell = GridCell(
                algo, env_id, precision, seed, int(block.get("episodes", episodes)), method,
                block.get("quant_delay", data.get("quant_delay")), block.get("n_timesteps", data.get("n_timesteps")),
            )  # fmt: skip
            if cell not in cells:
                cells.append(cell)
    return Study(str(data.get("name", path.stem)), tuple(cells))


def select(
    cells: tuple[GridCell, ...] | list[GridCell],
    algos: list[str] | None = None,
    envs: list[str] | None = None,
    precisions: list[str] | None = None,
) -> list[GridCell]:
    """The cells matching every given filter (env names may be aliases, precisions any accepted spelling)."""
    env_ids = {resolve_env_id(e) for e in envs} if envs else None
    wanted = {parse_precision(p) for p in precisions} if precisions else None
    return [
        cell
        for cell in cells
        if (not algos or cell.algo in algos)
        and (env_ids is None or cell.env_id in env_ids)
        and (wanted is None or cell.precision in wanted)
    ]
