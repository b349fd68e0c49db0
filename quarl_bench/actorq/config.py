"""ActorQ run settings: ActorQConfig (validated), study files (``zoo_configs/actorq.yaml``) and run selection."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.algorithms import ACTORQ_ALGOS
from quarl_bench.zoo.envs import resolve_env_id

ACTOR_PRECISIONS = ("fp32", "fp16", "int8")
ACTOR_INT8_RUNTIMES = ("onnxruntime", "torch")  # onnxruntime measured ~2x faster at batch 1 here (actor_inference.py)


@dataclass(frozen=True)
class ActorQConfig:
    """One distributed training run (fields as the ``quarl-bench actorq`` flags)."""

    method: ClassVar[str] = "actorq"
    env_id: str
    actor_precision: str = "int8"
    comm_bits: int = 32
    n_actors: int = 2
    policy_arch: tuple[int, ...] = (2048, 2048, 2048)
    pull_period: int = 1000
    samples_per_insert: float = 16.0
    batch_size: int = 256
    max_actor_steps: int = 50_000
    target_reward: float | None = None
    max_seconds: float | None = None  # wall-clock budget: actors stop at their next pull after it
    seed: int = 0
    eval_every_s: float = 10.0
    eval_episodes: int = 10
    algo: str = "dqn"
    learning_starts: int | None = None  # None: rl-zoo3's value for algo/env
    int8_backend: str = "onnxruntime"  # how int8 actors run: ONNX Runtime's int8 kernels, or torch's
    learner_device: str | None = None  # None: cuda when torch sees a GPU, else cpu (actors always run on CPU cores)

    def __post_init__(self) -> None:
        if self.actor_precision not in ACTOR_PRECISIONS:
            raise QuarlError(
                f"bad actor precision {self.actor_precision!r}: expected one of {', '.join(ACTOR_PRECISIONS)}"
            )
        if self.int8_backend not in ACTOR_INT8_RUNTIMES:
            raise QuarlError(
                f"bad int8 backend {self.int8_backend!r}: expected one of {', '.join(ACTOR_INT8_RUNTIMES)}"
            )
        if self.comm_bits not in (32, 16) and not 2 <= self.comm_bits <= 8:
            raise QuarlError(f"bad comm bits {self.comm_bits}: expected 32, 16 or 2-8")
        if self.learner_device not in (None, "cpu", "cuda"):
            raise QuarlError(f"bad learner device {self.learner_device!r}: expected cpu or cuda")
        if self.algo not in ACTORQ_ALGOS:
            raise QuarlError(f"bad ActorQ algo {self.algo!r}: expected one of {', '.join(ACTORQ_ALGOS)}")

    def env_spaces(self):
        """The env's (observation, action) spaces, checked against the learner: DQN needs discrete actions,
        TD3/DDPG continuous ones.

        :raises QuarlError: for an env gymnasium does not know or a learner that cannot act in it.
        """
        import gymnasium as gym
        from gymnasium import spaces

        try:
            env = gym.make(self.env_id)
        except gym.error.Error as error:
            raise QuarlError(f"bad env {self.env_id!r} for ActorQ: {error}") from error
        observation_space, space = env.observation_space, env.action_space
        env.close()
        discrete = isinstance(space, spaces.Discrete)
        if discrete != (self.algo == "dqn"):
            wanted = "dqn" if discrete else "td3, ddpg or d4pg"
            raise QuarlError(
                f"bad ActorQ algo {self.algo!r} for {self.env_id} ({type(space).__name__} actions): expected {wanted}"
            )
        return observation_space, space

    def run_key(self) -> str:
        """Identity of the setting: the run without the actors' precision and the seed, so the fp32, fp16 and int8
        runs of every seed of one setting share it (the report pairs them by it; the seed is the row's own)."""
        fields = asdict(self) | {"actor_precision": None, "seed": None}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


SETTINGS = {f.name for f in dataclasses.fields(ActorQConfig)} - {"env_id", "algo", "actor_precision", "seed"}


def load_actorq_grid(path: str | Path, overrides: dict[str, Any] | None = None) -> list[ActorQConfig]:
    """The runs of a study file, in file order; ``overrides`` (e.g. flags given on the command line) replace
    the file's ``settings``.

    :raises QuarlError: for a missing file, an unknown setting, or a bad algo, env or precision.
    """
    from quarl_bench.config import grid_file, missing_grid

    path = grid_file(path)
    if not path.is_file():
        raise QuarlError(missing_grid("ActorQ grid", path))
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    settings = dict(data.get("settings", {}))
    check_settings(settings, path)
    configs: list[ActorQConfig] = []
    for block in data.get("grid", []):
        # a block's own settings (a task's step budget, pull period) replace the file's; flags replace both
        block_settings = settings | dict(block.get("settings") or {})
        check_settings(block_settings, path)
        if "policy_arch" in block_settings:
            block_settings["policy_arch"] = tuple(int(width) for width in block_settings["policy_arch"])
        block_settings |= overrides or {}
        product = itertools.product(block["algos"], block["envs"], block["precisions"], data.get("seeds", [0]))
        for algo, env, precision, seed in product:
            config = ActorQConfig(
                resolve_env_id(str(env)), str(precision), algo=str(algo), seed=int(seed), **block_settings
            )
            if config not in configs:
                configs.append(config)
    return configs


def check_settings(settings: dict[str, Any], path: Path) -> None:
    unknown = sorted(set(settings) - SETTINGS)
    if unknown:
        raise QuarlError(f"bad setting {unknown[0]!r} in {path}: expected one of {', '.join(sorted(SETTINGS))}")


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


def requested_runs(
    grid: Path | None,
    overrides: dict[str, Any],
    algo: str | None = None,
    env: str | None = None,
    precision: str | None = None,
    seeds: list[int] | None = None,
) -> list[ActorQConfig]:
    """Without a grid: the run described by ``overrides`` (default dqn, CartPole-v1, int8 actors), once per seed.
    With one: its runs filtered by algo/env/precision, ``overrides`` replacing its settings and ``seeds`` its seeds.

    :raises QuarlError: when nothing in the grid matches the filters.
    """
    if grid is None:
        env_id = resolve_env_id(env or "CartPole-v1")
        return [
            ActorQConfig(env_id, precision or "int8", algo=algo or "dqn", **overrides | {"seed": seed})
            for seed in dict.fromkeys(seeds or [0])
        ]
    configs = select_runs(
        load_actorq_grid(grid, overrides),
        [algo] if algo else None,
        [env] if env else None,
        [precision] if precision else None,
    )
    if seeds:
        configs = list(dict.fromkeys(dataclasses.replace(c, seed=s) for s in seeds for c in configs))
    if not configs:
        raise QuarlError(f"no run in {grid} matches --algo {algo} --env {env} --actor-precision {precision}")
    return configs
