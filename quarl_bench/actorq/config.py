"""ActorQ run settings: ActorQConfig (validated), study files (``zoo_configs/actorq.yaml``) and run selection."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.algorithms import ACTORQ_ALGOS

ACTOR_PRECISIONS = ("fp32", "fp16", "int8")
ACTOR_INT8_RUNTIMES = ("onnxruntime", "torch")
EVAL_CLOCKS = ("seconds", "actor_steps", "updates")  # what the evaluation schedule counts (statistics/time_to_target)
# fields added after runs were stored: left out of a run's key while at their defaults, so stored runs keep theirs
LATER_FIELDS = {
    "eval_clock": "seconds",
    "eval_every_count": 5000,
    "near_target_episodes": 0,
}  # onnxruntime measured ~2x faster at batch 1 here (actor_inference.py)
# the settings a flag overrides (in a study file's runs too): every field but the run's identity (env, algo,
# precision, seed: chosen by the study file or their own flags)
FLAG_SETTINGS = (
    "int8_backend",
    "comm_bits",
    "n_actors",
    "policy_arch",
    "pull_period",
    "samples_per_insert",
    "batch_size",
    "learning_starts",
    "max_actor_steps",
    "target_reward",
    "max_seconds",
    "eval_every_s",
    "eval_episodes",
    "learner_device",
    "eval_clock",
    "eval_every_count",
    "near_target_episodes",
)


@dataclass(frozen=True)
class ActorQConfig:
    """One distributed training run (its fields are the ``quarl-bench actorq`` flags).

    :param env_id: env id or alias.
    :param actor_precision: the actors' precision: fp32, fp16 or int8.
    :param comm_bits: bits per broadcast weight: 32, 16 or 2-8.
    :param n_actors: actor processes.
    :param policy_arch: hidden widths, comma-separated.
    :param pull_period: actor steps between weight pulls.
    :param samples_per_insert: upper bound on the learner's replay ratio.
    :param batch_size: learner batch size.
    :param max_actor_steps: steps per actor.
    :param target_reward: stop once the learner reaches it.
    :param max_seconds: stop after this much wall-clock time (actors stop at their next pull).
    :param seed: the run's seed.
    :param eval_every_s: seconds between learner evaluations.
    :param eval_episodes: episodes per evaluation.
    :param algo: learner: dqn (discrete actions) or td3/ddpg/d4pg (continuous).
    :param learning_starts: transitions before training; None: rl-zoo3's value for the algo and env.
    :param int8_backend: int8 actor kernels: onnxruntime (the faster one here) or torch.
    :param learner_device: where the learner trains, cpu or cuda; None: cuda when there is a GPU (actors stay on
        CPU cores).
    :param eval_clock: what schedules the learner's evaluations: seconds (every eval_every_s), or actor_steps or
        updates (every eval_every_count of them): a machine-independent clock for time to target.
    :param eval_every_count: actor steps or learner updates between evaluations, with eval_clock actor_steps or
        updates.
    :param near_target_episodes: with target_reward, extra episodes for an evaluation whose mean lies within 10% of
        the target (where a crossing is decided, the mean is read from more episodes).
    """

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
    eval_clock: str = "seconds"
    eval_every_count: int = 5000
    near_target_episodes: int = 0

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
        if self.eval_clock not in EVAL_CLOCKS:
            raise QuarlError(f"bad eval clock {self.eval_clock!r}: expected one of {', '.join(EVAL_CLOCKS)}")
        if self.near_target_episodes < 0:
            raise QuarlError(f"bad near target episodes {self.near_target_episodes}: expected an integer >= 0")
        if self.learner_device not in (None, "cpu", "cuda"):
            raise QuarlError(f"bad learner device {self.learner_device!r}: expected cpu or cuda")
        if self.algo not in ACTORQ_ALGOS:
            raise QuarlError(f"bad ActorQ algo {self.algo!r}: expected one of {', '.join(ACTORQ_ALGOS)}")
        for name in ("n_actors", "pull_period", "batch_size", "max_actor_steps", "eval_episodes", "eval_every_count"):
            if getattr(self, name) < 1:
                raise QuarlError(f"bad {name.replace('_', ' ')} {getattr(self, name)}: expected an integer >= 1")
        for name in ("samples_per_insert", "eval_every_s"):
            if not getattr(self, name) > 0:
                raise QuarlError(f"bad {name.replace('_', ' ')} {getattr(self, name):g}: expected a number > 0")
        if not self.policy_arch or min(self.policy_arch) < 1:
            raise QuarlError(f"bad policy arch {self.policy_arch}: expected one or more widths >= 1")

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
        for name, default in LATER_FIELDS.items():
            if fields[name] == default:
                del fields[name]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


SETTINGS = {f.name for f in dataclasses.fields(ActorQConfig)} - {"env_id", "algo", "actor_precision", "seed"}


def load_actorq_grid(path: str | Path, overrides: dict[str, Any] | None = None) -> list[ActorQConfig]:
    """The runs of a study file, in file order; ``overrides`` (e.g. flags given on the command line) replace
    the file's ``settings``.

    :raises QuarlError: for a missing file, an unknown setting, or a bad algo, env or precision.
    """
    import yaml

    from quarl_bench.config import grid_file, missing_grid
    from quarl_bench.zoo.envs import resolve_env_id

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
    from quarl_bench.zoo.envs import resolve_env_id

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
    from quarl_bench.zoo.envs import resolve_env_id

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
