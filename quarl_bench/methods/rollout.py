"""Quantized rollouts (method ``rollout``): train PPO/A2C with rl-zoo3's hyperparameters on rollouts played by a
quantized copy of the policy, then evaluate the trained fp32 policy; one row per run with its per-update curve.

A run's row key holds its study (algo, env, budget, episodes), its correction and cap, its precision and seed; its
reference row is the fp32-rollout run of the same study and seed (``Job.reference``), which every command adds.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quarl_bench.config import zoo_hyperparameters
from quarl_bench.errors import QuarlError
from quarl_bench.methods.protocol import register
from quarl_bench.registry import REFERENCE_RULES
from quarl_bench.training.options import ROLLOUT_BACKENDS, ROLLOUT_CORRECTIONS
from quarl_bench.types import ROLLOUT_REFERENCE, AgentRef, EvalResult, Job, QuantSpec
from quarl_bench.zoo.algorithms import ALGOS, ROLLOUT_ALGOS

if TYPE_CHECKING:
    from quarl_bench.jobs.work import Work

# the settings a flag overrides (in a study file's runs too); the run's identity (algo, env, precision, correction,
# seed) has flags of its own
FLAG_SETTINGS = ("cap", "n_timesteps", "backend", "episodes")
# Reward a run must reach for "time to threshold": gymnasium's reward_threshold where the env has one, else these.
THRESHOLDS = {"Pendulum-v1": -200.0, "HalfCheetahBulletEnv-v0": 2500.0}


@dataclass(frozen=True)
class RolloutConfig:
    """One training run on quantized rollouts (fields as the ``quarl-bench rollout`` flags).

    :param precision: the behaviour policy's precision (``fp32``, ``fp16``, ``bf16``, ``fp8-e4m3``, ``int8``,
        ``int4``, ...: anything ``--bits`` takes).
    :param correction: ``none`` (naive), ``tis`` (truncated importance sampling) or ``mis`` (masked).
    :param cap: the ratio cap C of ``tis``/``mis``.
    :param n_timesteps: training budget; None = rl-zoo3's for the pair.
    :param backend: ``torch`` (weights on the PTQ grid) or ``onnxruntime`` (int8 kernels, int8 only).
    :param episodes: episodes the trained fp32 policy is evaluated on.
    """

    algo: str
    env_id: str
    precision: str = "int8"
    correction: str = "none"
    cap: float = 2.0
    seed: int = 0
    n_timesteps: int | None = None
    backend: str = "torch"
    episodes: int = 100

    method: ClassVar[str] = "rollout"

    def __post_init__(self) -> None:
        if self.algo not in ROLLOUT_ALGOS:
            if self.correction in ("tis", "mis") and self.algo in ALGOS:
                raise QuarlError(
                    f"bad algo {self.algo!r} for --correction {self.correction}: importance-sampling corrections "
                    f"apply to on-policy learning (expected {' or '.join(ROLLOUT_ALGOS)}; ActorQ covers off-policy)"
                )
            raise QuarlError(f"bad algo {self.algo!r} for quantized rollouts: expected {' or '.join(ROLLOUT_ALGOS)}")
        object.__setattr__(self, "precision", QuantSpec(self.precision).precision)
        if self.correction not in ROLLOUT_CORRECTIONS:
            raise QuarlError(f"bad correction {self.correction!r}: expected one of {', '.join(ROLLOUT_CORRECTIONS)}")
        if not (math.isfinite(self.cap) and self.cap >= 1):
            raise QuarlError(f"bad cap {self.cap:g}: expected a ratio cap C >= 1")
        if self.backend not in ROLLOUT_BACKENDS:
            raise QuarlError(f"bad rollout backend {self.backend!r}: expected one of {', '.join(ROLLOUT_BACKENDS)}")
        if self.backend == "onnxruntime" and self.precision != "int8":
            raise QuarlError(
                f"bad rollout precision {self.precision!r} for --rollout-backend onnxruntime: expected int8"
            )
        if self.backend == "onnxruntime" and zoo_hyperparameters(self.algo, self.env_id).get("use_sde"):
            raise QuarlError(
                f"--rollout-backend onnxruntime: rl-zoo3's {self.algo} on {self.env_id} explores with gSDE, which needs "
                "the actor's latent features (expected --rollout-backend torch)"
            )
        if self.n_timesteps is not None and self.n_timesteps < 1:
            raise QuarlError(f"bad timesteps {self.n_timesteps}: expected an integer >= 1")
        if self.episodes < 1:
            raise QuarlError(f"bad episode count {self.episodes}: expected an integer >= 1")

    def study(self) -> str:
        """What a comparison holds fixed: runs of one study differ only in precision, correction, cap and seed."""
        fields = {"algo": self.algo, "env_id": self.env_id, "n_timesteps": self.n_timesteps, "episodes": self.episodes}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]

    def label(self) -> str:
        """``none``, ``tis-c2``, ``mis-c1.5``; ``-ort`` for ONNX Runtime rollouts."""
        text = self.correction if self.correction == "none" else f"{self.correction}-c{self.cap:g}"
        return text + ("-ort" if self.backend == "onnxruntime" else "")

    def reference(self) -> RolloutConfig:
        """The fp32-rollout, naive-loss run this run is compared with (same study and seed)."""
        return replace(self, precision="fp32", correction=ROLLOUT_REFERENCE, cap=2.0, backend="torch")

    def folder(self, cache_dir: Path) -> Path:
        return cache_dir / "rollout" / f"{self.study()}-{self.precision}-{self.label()}-seed{self.seed}"


def reference_job(fp32: Job) -> Job:
    """A run's reference: the fp32-rollout run of the same study and seed (``{study}/{correction}``: the naive,
    uncorrected loss, :data:`ROLLOUT_REFERENCE`)."""
    return replace(fp32, setting=f"{fp32.setting.split('/')[0]}/{ROLLOUT_REFERENCE}")


REFERENCE_RULES[RolloutConfig.method] = reference_job


def job_for(config: RolloutConfig) -> Job:
    """The row's identity: precision in the spec, ``{study}/{label}`` in the setting, no agent hash (the agent is
    the run's product, not its input)."""
    from quarl_bench.zoo.envs import default_eval_envs

    spec = QuantSpec(config.precision)
    n_envs = min(default_eval_envs(config.env_id), config.episodes)
    return Job(
        config.algo,
        config.env_id,
        spec,
        "",
        config.episodes,
        config.seed,
        n_envs,
        setting=f"{config.study()}/{config.label()}",
        method=RolloutConfig.method,
    )


def reward_threshold(env_id: str) -> float | None:
    """gymnasium's ``reward_threshold`` for the env, else :data:`THRESHOLDS`'s, else None."""
    import gymnasium as gym

    from quarl_bench.zoo.envs import register_env

    register_env(env_id)
    spec = gym.spec(env_id)
    return spec.reward_threshold if spec.reward_threshold is not None else THRESHOLDS.get(env_id)


def train_rollout(config: RolloutConfig, cache_dir: Path, force: bool = False):
    """Train (unless the cache holds this run, or ``force``) and return the agent; its ``quarl_training.json`` holds
    the config, the per-update curve and diagnostics, and the time split."""
    from quarl_bench.store.provenance import TRAINING_RECORD
    from quarl_bench.zoo.agents import find_in_folder
    from quarl_bench.zoo.algorithms import algorithm
    from quarl_bench.zoo.train import train_with_callbacks

    folder = config.folder(cache_dir)
    ref = find_in_folder(folder, config.algo, config.env_id, "rollout")
    if ref is not None and not force and (Path(ref.run_dir) / TRAINING_RECORD).is_file():
        return ref
    trained: dict[str, Any] = {}

    def prepare(model, n_timesteps: int) -> list:
        model.use_quantized_rollouts(config.precision, config.correction, config.cap, config.backend)
        trained.update(model=model, n_timesteps=n_timesteps)
        return []

    run_dir = train_with_callbacks(
        config.algo,
        config.env_id,
        folder,
        config.seed,
        config.n_timesteps,
        prepare,
        {"rollout": asdict(config)},
        algo_class=algorithm(config.algo).rollout_class(),
    )
    model = trained["model"]
    record = {
        "rollout": asdict(config),
        "training_steps": trained["n_timesteps"],
        "threshold": reward_threshold(config.env_id),
        "seconds": model.timings(),
        "curve": model.rollout_log,
    }
    (run_dir / TRAINING_RECORD).write_text(json.dumps(record))
    ref = find_in_folder(folder, config.algo, config.env_id, "rollout")
    assert ref is not None, f"rl-zoo3 saved no agent in {run_dir}"
    return ref


@register(RolloutConfig)
class RolloutHandler:
    """One run: train (or find in the cache) PPO/A2C on quantized rollouts, then evaluate the trained fp32 policy
    on the row's episodes (the learner's product: the quantized copy only played the training env)."""

    # any node: a run trains in a task's own folder; the driver stores its row

    def agent(self, work: Work) -> None:
        return None  # the run makes its agent

    def jobs(self, work: Work, agent: AgentRef | None) -> list[Job]:
        return [job_for(work.config)]

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[Job]) -> Iterator[EvalResult]:
        from quarl_bench.methods.ptq import evaluate_job
        from quarl_bench.zoo.forms import load_agent

        config = work.config
        ref = train_rollout(config, work.cache, work.retrain)
        job = job_for(config)
        result = evaluate_job(load_agent(ref), replace(job, spec=QuantSpec("fp32")), work.driver)
        # the row's precision is the rollouts'; what played its episodes is said here, in words and as a precision
        evaluated = {
            "evaluated_policy": f"the fp32 learner trained on {config.precision} rollouts",
            "evaluated_precision": "fp32",
            "rollout_precision": config.precision,
        }
        yield replace(result, job=job, provenance=result.provenance | evaluated)


def with_references(configs: list[RolloutConfig]) -> list[RolloutConfig]:
    """``configs`` with each one's fp32 reference run first, each run once."""
    runs: list[RolloutConfig] = []
    for config in configs:
        for run in (config.reference(), config):
            if run not in runs:
                runs.append(run)
    return runs


SETTINGS = ("cap", "n_timesteps", "backend", "episodes")  # what a grid's ``settings`` (or a block's) may set


def load_rollout_grid(path: str | Path, overrides: dict[str, Any] | None = None) -> list[RolloutConfig]:
    """The runs of a study file (``zoo_configs/rollout.yaml``): per block, every algo x env x seed x precision x
    correction, each after its fp32 reference; ``overrides`` (flags) replace the file's and blocks' settings.

    :raises QuarlError: for a missing file, an unknown setting, or a bad algo, env, precision or correction.
    """
    import itertools

    import yaml

    from quarl_bench.config import grid_file, missing_grid
    from quarl_bench.zoo.envs import resolve_env_id

    path = grid_file(path)
    if not path.is_file():
        raise QuarlError(missing_grid("rollout grid", path))
    data = yaml.safe_load(path.read_text()) or {}
    configs: list[RolloutConfig] = []
    for block in data.get("grid", []):
        settings = dict(data.get("settings") or {}) | dict(block.get("settings") or {})
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise QuarlError(f"bad setting {unknown[0]!r} in {path}: expected one of {', '.join(SETTINGS)}")
        settings |= overrides or {}
        product = itertools.product(
            block["algos"], block["envs"], data.get("seeds", [0]), block["precisions"], block["corrections"]
        )
        for algo, env, seed, precision, correction in product:
            config = RolloutConfig(
                str(algo), resolve_env_id(str(env)), str(precision), str(correction), seed=int(seed), **settings
            )
            configs.append(config)
    return with_references(configs)


def requested_rollouts(
    grid: Path | None,
    overrides: dict[str, Any],
    algo: str | None,
    env: str | None,
    precisions: list[str] | None,
    corrections: list[str] | None,
    seeds: list[int] | None,
) -> list[RolloutConfig]:
    """Without a grid: every precision x correction x seed of the flags (default ppo, int8, none, seed 0), each
    after its fp32 reference. With one: its runs, filtered by the flags (references kept), seeds replaced.

    :raises QuarlError: for bad values, a missing env, or a filter nothing in the grid matches.
    """
    from quarl_bench.zoo.envs import resolve_env_id

    if grid is None:
        if env is None:
            raise QuarlError("quarl-bench rollout needs --env ENV (or --grid FILE)")
        configs = [
            RolloutConfig(algo or "ppo", resolve_env_id(env), p, c, seed=s, **overrides)
            for s in dict.fromkeys(seeds or [0])
            for p in precisions or ["int8"]
            for c in corrections or ["none"]
        ]
        return with_references(configs)
    configs = load_rollout_grid(grid, overrides)
    env_id = resolve_env_id(env) if env else None
    chosen = [
        c
        for c in configs
        if (not algo or c.algo == algo)
        and (env_id is None or c.env_id == env_id)
        and (not precisions or c.precision in {QuantSpec(p).precision for p in precisions})
        and (not corrections or c.correction in corrections)
    ]
    if seeds:
        chosen = [replace(c, seed=s) for s in dict.fromkeys(seeds) for c in chosen]
    if not chosen:
        raise QuarlError(f"no run in {grid} matches --algo {algo} --env {env} --rollout-precision {precisions}")
    return with_references(chosen)
