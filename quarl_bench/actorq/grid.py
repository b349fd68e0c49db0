"""ActorQ study files (``zoo_configs/actorq.yaml``): shared run settings x algos x envs x actor precisions x seeds."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import yaml

from quarl_bench.actorq.run import ActorQConfig
from quarl_bench.errors import QuarlError
from quarl_bench.zoo.envs import resolve_env_id

SETTINGS = {f.name for f in dataclasses.fields(ActorQConfig)} - {"env_id", "algo", "actor_precision", "seed"}


def load_actorq_grid(path: str | Path, overrides: dict[str, Any] | None = None) -> list[ActorQConfig]:
    """The runs of a study file, in file order; ``overrides`` (e.g. flags given on the command line) replace
    the file's ``settings``.

    :raises QuarlError: for a missing file, an unknown setting, or a bad algo, env or precision.
    """
    path = Path(path)
    if not path.is_file():
        raise QuarlError(f"ActorQ grid {str(path)!r} not found: expected a YAML file such as zoo_configs/actorq.yaml")
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    settings = dict(data.get("settings", {}))
    unknown = sorted(set(settings) - SETTINGS)
    if unknown:
        raise QuarlError(f"bad setting {unknown[0]!r} in {path}: expected one of {', '.join(sorted(SETTINGS))}")
    if "policy_arch" in settings:
        settings["policy_arch"] = tuple(int(width) for width in settings["policy_arch"])
    settings |= overrides or {}
    configs: list[ActorQConfig] = []
    for block in data.get("grid", []):
        product = itertools.product(block["algos"], block["envs"], block["precisions"], data.get("seeds", [0]))
        for algo, env, precision, seed in product:
            config = ActorQConfig(resolve_env_id(str(env)), str(precision), algo=str(algo), seed=int(seed), **settings)
            if config not in configs:
                configs.append(config)
    return configs


def select_runs(configs: list[ActorQConfig], algos=None, envs=None, precisions=None) -> list[ActorQConfig]:
    """The runs matching every given filter (env names may be aliases)."""
    env_ids = {resolve_env_id(e) for e in envs} if envs else None
    return [
        c
        for c in configs
        if (not algos or c.algo in algos)
        and (env_ids is None or c.env_id in env_ids)
        and (not precisions or c.actor_precision in precisions)
    ]


def requested_runs(grid: Path | None, overrides: dict[str, Any], algo: str | None = None, env: str | None = None,
                   precision: str | None = None, seed: int | None = None) -> list[ActorQConfig]:  # fmt: skip
    """Without a grid: the one run described by ``overrides`` (default dqn, CartPole-v1, int8 actors). With one:
    its runs filtered by algo/env/precision, ``overrides`` replacing its settings and ``seed`` its seeds.

    :raises QuarlError: when nothing in the grid matches the filters.
    """
    if grid is None:
        env_id = resolve_env_id(env or "CartPole-v1")
        seeded = overrides | ({"seed": seed} if seed is not None else {})
        return [ActorQConfig(env_id, precision or "int8", algo=algo or "dqn", **seeded)]
    configs = select_runs(load_actorq_grid(grid, overrides), [algo] if algo else None, [env] if env else None,
                          [precision] if precision else None)  # fmt: skip
    if seed is not None:
        configs = list(dict.fromkeys(dataclasses.replace(c, seed=seed) for c in configs))
    if not configs:
        raise QuarlError(f"no run in {grid} matches --algo {algo} --env {env} --actor-precision {precision}")
    return configs
