"""YAML grids (``zoo_configs/*.yaml``) and command-line flags to Jobs: every Job is built here.

A grid expands algos x envs x precisions x seeds and, where a block lists them, granularities, symmetric, bias
and layer modes. Building a Job decides what the rest of the pipeline takes as given: the number of envs played
at once and how actions are chosen (rl-zoo3's ``enjoy`` rule).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from quarl_bench.action_modes import ActionMode
from quarl_bench.errors import QuarlError
from quarl_bench.jobs.spec_options import EVERY_SPEC_OPTION, check_spec_options, options_set
from quarl_bench.types import (
    DEFAULT_METHOD,
    GRANULARITIES,
    INPUT_FIELDS,
    LAYER_MODES,
    RECIPE_FIELDS,
    AgentRef,
    DeployTarget,
    Job,
    QuantSpec,
)
from quarl_bench.zoo.algorithms import ALGOS
from quarl_bench.zoo.forms import form_of

SPEC_KEYS = ("granularity", "symmetric", "quantize_bias", "layers")  # sweepable per grid block
# PTQ recipe keys a block may sweep too, with QuantSpec's defaults (it validates each value and fills in the
# calibration defaults where a recipe needs them)
RECIPE_DEFAULTS: dict[str, Any] = {
    name: getattr(QuantSpec(), name) for name in (*RECIPE_FIELDS, "calibration_states", "calibration_method")
}


@dataclass(frozen=True)
class EvalSettings:
    """How every job of a run is evaluated.

    :param episodes: episodes per job (QuaRL used 100).
    :param seed: env ``i`` is seeded ``seed + i``; fp32 and quantized jobs share seeds, so share episodes.
    :param n_envs: envs stepped together with batched inference; None = ``zoo_configs/envs.yaml``.
    :param seeds: several evaluation seeds (``--eval-seeds``): every job once per seed, ``episodes`` each; empty:
        ``seed`` alone.
    :param obs_noise: std of Gaussian noise on every observation the policies see (0: none).
    :param random_baseline: also evaluate the uniform-random policy (the 0 of normalised scores), once per seed.
    :param perturbation: the condition every job plays under (``--perturb``, canonical; '' = nominal).
    :param judge: a user's function deciding each episode's success or progress (``success=FILE.py:FN``; '' =
        the env's info).
    """

    episodes: int = 100
    seed: int = 0
    n_envs: int | None = None
    seeds: tuple[int, ...] = ()
    obs_noise: float = 0.0
    random_baseline: bool = False
    perturbation: str = ""
    judge: str = ""

    @property
    def all_seeds(self) -> tuple[int, ...]:
        return self.seeds or (self.seed,)


def action_mode(ref: AgentRef) -> ActionMode:
    """rl-zoo3's ``enjoy``: deterministic, except on Atari, where actions are stochastic: sampled from the policy
    for PPO/A2C, and the model's epsilon-greedy ``predict`` at its saved (final) exploration rate for DQN/QR-DQN."""
    return form_of(ref).action_mode(ref)  # the agent's form knows (a torch module has no model to sample or explore)


@dataclass(frozen=True)
class Variants:
    """The jobs a work plays beside its specs': deployed ``targets``, and the specs of ``others`` (other methods
    played in the same work: PTQ's works carry ``mixed`` allocations, whose reference is PTQ's fp32 job)."""

    targets: Sequence[DeployTarget] = ()
    others: Mapping[str, Sequence[QuantSpec]] = field(default_factory=dict)


def build_jobs(
    ref: AgentRef,
    specs: Sequence[QuantSpec],
    settings: EvalSettings,
    method: str = DEFAULT_METHOD,
    variants: Variants = Variants(),
) -> list[Job]:
    """Per evaluation seed: the fp32 reference job first (``method``'s, :meth:`Job.reference`), then one job per
    distinct requested spec (all of ``method``), per deployed target and per spec of another method (``variants``),
    then the random policy's job if asked for."""
    targets = variants.targets
    from quarl_bench.zoo.envs import default_eval_envs

    n_envs = min(settings.n_envs or default_eval_envs(ref.env_id), settings.episodes)
    # a deployed artifact acts deterministically (argmax / mean inside the graph), Atari included
    actions = ActionMode("deterministic") if targets else action_mode(ref)
    jobs: list[Job] = []
    for seed in settings.all_seeds:
        played = Job(
            ref.algo,
            ref.env_id,
            QuantSpec("fp32"),
            ref.content_hash,
            settings.episodes,
            seed,
            n_envs,
            actions,
            obs_noise=settings.obs_noise,
            method=method,
            perturbation=settings.perturbation,
            judge=settings.judge,
        )
        base = played.reference()
        seed_jobs = [base]
        candidates = [replace(played, spec=spec) for spec in specs]
        candidates += [replace(base, target=target) for target in targets]
        candidates += [
            replace(played, spec=spec, method=name) for name, more in variants.others.items() for spec in more
        ]
        for job in candidates:
            if job not in seed_jobs:
                seed_jobs.append(job)
        if settings.random_baseline:
            seed_jobs.append(replace(base, spec=QuantSpec("fp32"), method="random", target=None))
        jobs += seed_jobs
    return jobs


@dataclass(frozen=True)
class GridCell:
    """One job of a study before its agent is resolved (the agent's content hash completes the Job)."""

    algo: str
    env_id: str
    spec: QuantSpec
    seed: int  # evaluation seed for ptq; training seed for qat (evaluated on seed 0)
    episodes: int
    quant_delay: int | None = None  # qat only; None = half the training steps
    n_timesteps: int | None = None  # qat only; None = rl-zoo3's budget
    model: str = ""  # a policy file (SB3 zip or ONNX) instead of a zoo agent; algo is then "model"
    env_packages: tuple[str, ...] = ()  # modules imported before the env is made
    method: str = DEFAULT_METHOD  # the registered method that evaluates it

    @property
    def precision(self) -> str:
        return self.spec.precision


@dataclass(frozen=True)
class Study:
    name: str
    cells: tuple[GridCell, ...]


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _spec_options(block: dict[str, Any], data: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """Every combination of the block's (or file's) granularity/symmetric/quantize_bias/layers values."""
    defaults = {"granularity": "auto", "symmetric": False, "quantize_bias": False, "layers": "paper"}
    values = {key: _listed(block.get(key, data.get(key, default))) for key, default in defaults.items()}
    for granularity in values["granularity"]:
        if granularity not in GRANULARITIES:
            raise QuarlError(f"bad granularity {granularity!r} in {path}: expected one of {', '.join(GRANULARITIES)}")
    for layers in values["layers"]:
        if layers not in LAYER_MODES:
            raise QuarlError(f"bad layers {layers!r} in {path}: expected one of {', '.join(LAYER_MODES)}")
    for key in ("symmetric", "quantize_bias"):
        if any(not isinstance(v, bool) for v in values[key]):
            raise QuarlError(f"bad {key} {values[key]!r} in {path}: expected true or false")
    values |= {key: _listed(block.get(key, data.get(key, default))) for key, default in RECIPE_DEFAULTS.items()}
    for key in INPUT_FIELDS:
        values[key] = ["" if v in ("", None) else str(v) for v in values[key]]
    keys = (*SPEC_KEYS, *RECIPE_DEFAULTS)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(values[k] for k in keys))]


def load_study(path: str | Path) -> Study:
    """Read a grid file: ``name``, ``episodes``, ``seeds``, ``method`` and ``grid`` blocks of algos (zoo agents) or
    ``models`` (policy files, with optional ``env_packages``) x envs x precisions (x granularity, symmetric,
    quantize_bias, layers where given).

    :raises QuarlError: for a missing file or a bad algo, env, precision or option in it.
    """
    from quarl_bench.config import grid_file, missing_grid
    from quarl_bench.registry import METHODS
    from quarl_bench.zoo.envs import env_with_packages

    path = grid_file(path)
    if not path.is_file():
        raise QuarlError(missing_grid("grid file", path))
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    episodes = int(data.get("episodes", 100))
    seeds = [int(s) for s in data.get("seeds", [0])]
    method = str(data.get("method", DEFAULT_METHOD))
    if method not in METHODS:  # a method module in no index is found by name
        raise QuarlError(
            f"bad method {method!r} in {path}: expected a registered method, one of {', '.join(METHODS.names())}"
        )
    cells: list[GridCell] = []
    for block in data.get("grid", []):
        # a block names zoo agents (algos) or policy files (models: paths relative to the grid file)
        models = [str((path.parent / str(model)).resolve()) for model in _listed(block.get("models", []))]
        algos = ["model"] if models else block.get("algos", [])
        bad = [algo for algo in algos if algo not in ALGOS] if not models else []
        if bad:
            raise QuarlError(f"bad algo {bad[0]!r} in {path}: expected one of {', '.join(ALGOS)}")
        packages = tuple(str(p) for p in _listed(block.get("env_packages", [])))
        envs = [env_with_packages(str(env), packages) for env in block["envs"]]
        options = _spec_options(block, data, path)
        for algo, (env_id, env_packages), model, precision, option, seed in itertools.product(
            algos, envs, models or [""], block["precisions"], options, seeds
        ):
            try:
                spec = QuantSpec(precision, **option)
            except QuarlError as error:
                raise QuarlError(f"{error} (in {path})") from None
            if any(options_set(spec).values()):  # what the method applies is its config's to say
                METHODS.load(method)  # a method without a config of its own (mixed) is played in PTQ's works
                takes = getattr(METHODS.entries.get(method), "spec_flags", EVERY_SPEC_OPTION)
                try:
                    check_spec_options(method, takes, spec)
                except QuarlError as error:
                    raise QuarlError(f"{error} (in {path})") from None
            cell = GridCell(
                algo,
                env_id,
                spec,
                seed,
                int(block.get("episodes", episodes)),
                block.get("quant_delay", data.get("quant_delay")),
                block.get("n_timesteps", data.get("n_timesteps")),
                model,
                env_packages,
                method,
            )
            if cell not in cells:
                cells.append(cell)
    return Study(str(data.get("name", path.stem)), tuple(cells))


def grid_return_bounds(path: str | Path) -> dict[str, tuple[float, float]]:
    """A grid file's ``return_bounds:`` (env id -> [LO, HI], every episode's return in it), which ``certify --grid``
    uses for those envs' finite-sample guarantee.

    :raises QuarlError: for bounds that are not two numbers LO < HI.
    """
    from quarl_bench.config import grid_file
    from quarl_bench.zoo.envs import env_settings
    from quarl_bench.zoo.return_bounds import ReturnBounds

    names = env_settings()

    path = grid_file(path)
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    bounds = {}
    for env, pair in (data.get("return_bounds") or {}).items():
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise QuarlError(f"bad return_bounds for {env} in {path}: expected [LO, HI]")
        try:
            low, high = float(pair[0]), float(pair[1])
        except (TypeError, ValueError):
            raise QuarlError(f"bad return_bounds {pair} for {env} in {path}: expected two numbers [LO, HI]") from None
        ReturnBounds(low, high, "")
        env_id = str(env).split(":")[-1]  # my_module:MyEnv-v0 -> its id
        env_id = names["aliases"].get(env_id, env_id)
        bounds[names["legacy_ids"].get(env_id, env_id)] = (low, high)
    return bounds


def select(
    cells: tuple[GridCell, ...] | list[GridCell],
    algos: Sequence[str] | None = None,
    envs: Sequence[str] | None = None,
    precisions: Sequence[str] | None = None,
    episodes: int | None = None,
) -> list[GridCell]:
    """The cells matching every given filter (env names may be aliases, precisions any accepted spelling);
    ``episodes`` overrides every cell's episode count."""
    from quarl_bench.precision import parse_precision
    from quarl_bench.zoo.envs import resolve_env_id

    env_ids = {resolve_env_id(e) for e in envs} if envs else None
    wanted = {parse_precision(p) for p in precisions} if precisions else None
    chosen = [
        cell
        for cell in cells
        if (not algos or cell.algo in algos)
        and (env_ids is None or cell.env_id in env_ids)
        and (wanted is None or cell.precision in wanted)
    ]
    return chosen if episodes is None else [replace(c, episodes=episodes) for c in chosen]
