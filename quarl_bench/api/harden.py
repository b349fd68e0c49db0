"""Hardening an agent for a narrow spec, and certifying what it bought (``quarl-bench harden``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quarl_bench.errors import QuarlError, note
from quarl_bench.types import AgentRef, QuantSpec
from quarl_bench.zoo.forms import form_of

if TYPE_CHECKING:
    from quarl_bench.store import ResultStore

BUDGET_SHARE = 0.1  # the default budget: this share of the zoo's training steps for the agent
LADDER = ("int8", "int6", "int5", "int4", "int3", "int2")


def zoo_steps(ref: AgentRef) -> int | None:
    """The agent's own training steps: ``n_timesteps`` of its saved ``config.yml``, else rl-zoo3's for its algo and
    env; None for a torch module or a pair rl-zoo3 has no hyperparameters for."""
    return form_of(ref).training_steps(ref)


def hardening_budget(ref: AgentRef, budget: int | None) -> int:
    """``budget``, checked against the agent's training steps, or a tenth of them.

    :raises QuarlError: for a budget below 1 or above the zoo's steps, or none given where the zoo has none.
    """
    steps = zoo_steps(ref)
    if budget is not None and budget < 1:
        raise QuarlError(f"bad --budget {budget}: expected env steps >= 1 (at most the zoo's training steps)")
    if budget is None:
        if steps is None:
            raise QuarlError(
                f"no zoo training steps for {ref.algo}/{ref.env_id} to take {BUDGET_SHARE:.0%} of: pass --budget STEPS"
            )
        return max(1, int(steps * BUDGET_SHARE))
    if steps is not None and budget > steps:
        raise QuarlError(
            f"bad --budget {budget}: expected at most the zoo's {steps} training steps for {ref.algo}/{ref.env_id} "
            f"(default {int(steps * BUDGET_SHARE)}, a tenth)"
        )
    return budget


def check_out(out: Path, suffix: str, force: bool) -> None:
    """An explicit output path: the right suffix, and nothing there unless ``force``.

    :raises QuarlError: naming the path and what is accepted.
    """
    if out.suffix.lower() != suffix:
        kind = "an SB3 agent" if suffix == ".zip" else "a torch module's policy, written as ONNX"
        raise QuarlError(f"bad --out {str(out)!r}: expected a path ending in {suffix} ({kind})")
    taken = [p for p in (out, out.with_suffix("")) if p.exists()]
    if taken and not force:
        raise QuarlError(f"--out {str(taken[0])!r} exists: pass --force to replace it, or choose another path")


def harden_agent(
    ref: AgentRef,
    spec: QuantSpec,
    recipe: str | Any,
    store: ResultStore,
    budget: int | None = None,
    out: str | os.PathLike | None = None,
    seed: int = 0,
    force: bool = False,
    settings: dict[str, dict[str, Any]] | None = None,
    cache: Path | None = None,
) -> dict[str, Any]:
    """Fine-tune ``ref`` for ``spec`` with ``recipe`` and write the hardened agent (see ``methods/harden.py``);
    the stored ``hardened`` row (``path``: the agent, ``agent_hash``: its hash, ``parent_hash``: the parent's).

    :param budget: env steps (default a tenth of the zoo's training steps for the agent).
    :param out: ``.zip`` (``.onnx`` for a torch module); None: the cache, where a run already made is reused.
    :raises QuarlError: for a bad spec, budget, recipe or output path, before anything is written.
    """
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.harden import HardenConfig, default_out
    from quarl_bench.run.runner import run_work
    from quarl_bench.store.provenance import driver_provenance
    from quarl_bench.training.harden.recipes import Recipe, parse_recipe
    from quarl_bench.zoo.agents import DEFAULT_CACHE

    store.check()
    parsed = recipe if isinstance(recipe, Recipe) else parse_recipe(str(recipe), settings)
    config = HardenConfig(ref, spec, parsed, hardening_budget(ref, budget), seed, str(out or ""))
    cache = cache or DEFAULT_CACHE
    if out is not None:
        check_out(Path(out), config.suffix, force)
    rerun = out is not None or force or not default_out(config, cache).is_file()
    return run_work(Work(config, cache=cache, driver=driver_provenance()), store, force=rerun)[0]


def parent_agent(ref: AgentRef) -> AgentRef:
    """The parent a hardened agent's ``harden.json`` names (``certify --against-parent``).

    :raises QuarlError: for an agent that ``quarl-bench harden`` did not write.
    """
    from quarl_bench.methods.harden import parent_of

    parent = parent_of(ref.model_path) if ref.model_path else None
    if parent is None:
        raise QuarlError(
            f"--against-parent: {ref.model_path or ref.run_dir} has no harden.json beside it: expected an agent "
            "written by quarl-bench harden (--model OUT.zip)"
        )
    return parent


def hardened_ref(row: dict[str, Any], parent: AgentRef) -> AgentRef:
    """The hardened agent of a stored row, resolved as ``--model`` resolves it."""
    from quarl_bench.methods.harden import hardened_agent

    return hardened_agent(parent, row["path"])


def certified_specs(target: QuantSpec, ladder: Sequence[str] = LADDER) -> tuple[QuantSpec, ...]:
    """What a hardening is certified at: the plain weight ladder of the target's grid from int8 down to its width,
    and the target itself where it quantizes more than weights (activations: its own family)."""
    from dataclasses import replace

    plain = target.weights_only()
    specs = [replace(plain, precision=p) for p in ladder if QuantSpec(p).bits >= target.bits]
    if not target.number_format.is_int:
        specs = [plain]
    if target != plain:
        specs.append(target)
    return tuple(dict.fromkeys(specs))


@dataclass(frozen=True)
class HardeningVerdicts:
    """The parent certified against its own fp32, and the hardened agent against the parent's fp32 (fp32 too)."""

    before: Any
    after: Any


def certify_hardening(
    parent: AgentRef,
    child: AgentRef,
    specs: tuple[QuantSpec, ...],
    config: Any,
    store: ResultStore,
    on_verdict: Callable[[str, Any], None] | None = None,
) -> HardeningVerdicts:
    """Certify ``specs`` for the parent (against its fp32) and for the hardened agent against the **parent's** fp32,
    with the same δ (the parent's scale rows), episodes paired one to one; ``on_verdict(which, verdict)``."""
    from quarl_bench.api.evaluate import certify_agent

    def told(which: str) -> Callable[[Any], None] | None:
        return (lambda found: on_verdict(which, found)) if on_verdict else None

    before = certify_agent(parent, specs, config, store, on_verdict=told("parent"))
    after = certify_agent(child, specs, config, store, on_verdict=told("hardened"), baseline=parent)
    return HardeningVerdicts(before, after)


@dataclass(frozen=True)
class HardenStudy:
    """``zoo_configs/harden.yaml``: agents x recipes, one target spec, one budget share, one certification."""

    agents: tuple[tuple[str, str], ...]
    recipes: tuple[str, ...]
    target: QuantSpec
    budget_share: float
    certify: Any
    settings: dict[str, dict[str, Any]]


def load_harden_study(path: str | Path) -> HardenStudy:
    """The study file (see ``zoo_configs/harden.yaml``).

    :raises QuarlError: for a missing file or a bad field, naming what is accepted.
    """
    import yaml

    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.config import grid_file, missing_grid
    from quarl_bench.training.harden.recipes import parse_recipe
    from quarl_bench.zoo.envs import resolve_env_id

    file = grid_file(path)
    if not Path(file).is_file():
        raise QuarlError(missing_grid("harden study", Path(path)))
    data = yaml.safe_load(Path(file).read_text()) or {}
    known = {"name", "agents", "recipes", "target", "budget_share", "certify", "settings"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise QuarlError(f"bad field {unknown[0]!r} in {file}: expected {', '.join(sorted(known))}")
    agents = tuple(
        (block["algo"], resolve_env_id(env)) for block in data.get("agents", []) for env in block.get("envs", [])
    )
    recipes = tuple(parse_recipe(name).name for name in data.get("recipes", ["distill"]))
    target = dict(data.get("target", {"bits": 4, "granularity": "per-channel"}))
    bits = str(target.pop("bits"))
    precision = bits if not bits.isdigit() else f"int{bits}"
    act = target.pop("act_bits", "")
    act = f"int{act}" if str(act).isdigit() else str(act or "")
    spec = QuantSpec(
        precision,
        **target,
        act_bits=act,
        calibration_states=1000 if act else 0,
        calibration_method="minmax" if act else "",
    )
    share = float(data.get("budget_share", BUDGET_SHARE))
    if not 0 < share <= 1:
        raise QuarlError(f"bad budget_share {share:g} in {file}: expected a share of the zoo's steps in (0, 1]")
    return HardenStudy(agents, recipes, spec, share, CertifyConfig(**data.get("certify", {})), data.get("settings", {}))


@dataclass(frozen=True)
class StudyLine:
    """One agent x recipe of the study: the hardened row and both certifications."""

    parent: AgentRef
    recipe: str
    row: dict[str, Any]
    verdicts: HardeningVerdicts


def run_harden_study(
    study: HardenStudy,
    sources: Any,
    store: ResultStore,
    algos: Sequence[str] | None = None,
    envs: Sequence[str] | None = None,
    recipes: Sequence[str] | None = None,
    on_start: Callable[[AgentRef, str], None] | None = None,
    on_line: Callable[[StudyLine], None] | None = None,
) -> list[StudyLine]:
    """Every agent x recipe of the study (filtered): hardened (or found in the cache and store) with a budget of
    ``budget_share`` of the agent's zoo steps, then certified before and after. Resumes: stored hardenings,
    batches and verdicts are reused."""

    from quarl_bench.training.harden.recipes import parse_recipe
    from quarl_bench.zoo.envs import resolve_env_id
    from quarl_bench.zoo.resolve import AgentQuery, resolve

    wanted_envs = {resolve_env_id(e) for e in envs} if envs else None
    wanted_recipes = [parse_recipe(r).name for r in recipes] if recipes else None
    specs = certified_specs(study.target)
    chosen = [
        (algo, env_id)
        for algo, env_id in study.agents
        if not (algos and algo not in algos) and not (wanted_envs and env_id not in wanted_envs)
    ]
    if not chosen or (wanted_recipes and not set(wanted_recipes) & set(study.recipes)):
        raise QuarlError(
            f"no agent x recipe of the harden study matches the filters: it holds "
            f"{', '.join(f'{a}/{e}' for a, e in study.agents)} with recipes {', '.join(study.recipes)}; check "
            "--algo/--env/--recipe"
        )
    lines = []
    for algo, env_id in chosen:
        try:
            parent = resolve(
                AgentQuery(
                    env_id,
                    algo,
                    folder=str(sources.folder) if sources.folder else None,
                    cache=str(sources.cache),
                    use_hub=sources.use_hub,
                    train_if_missing=sources.train_if_missing,
                )
            )
        except QuarlError as error:
            note(f"skipped {algo}/{env_id}: {error}")
            continue
        steps = zoo_steps(parent)
        budget = max(1, int((steps or 0) * study.budget_share)) if steps else None
        for recipe in study.recipes:
            if wanted_recipes and recipe not in wanted_recipes:
                continue
            if on_start:
                on_start(parent, recipe)
            settings = {part: study.settings[part] for part in recipe.split("+") if part in study.settings}
            row = harden_agent(parent, study.target, recipe, store, budget, settings=settings, cache=sources.cache)
            child = hardened_ref(row, parent)
            line = StudyLine(parent, recipe, row, certify_hardening(parent, child, specs, study.certify, store))
            lines.append(line)
            if on_line:
                on_line(line)
    return lines


def backend_target(backend: str, given: dict[str, object]) -> QuantSpec:
    """The spec ``harden --for BACKEND`` aims at: the backend's claim, the fake-quant policy its artifact is gated
    and certified against (``c-int4``: int4 per-channel symmetric weights, int8 activations).

    :param given: spec flags the user gave beside ``--for`` (``precision``, ``granularity``, ``act_bits``, ...).
    :raises QuarlError: in one line, for an unknown backend, one whose artifact has nothing to harden for (fp32,
        fp16), or a given flag that contradicts its claim.
    """
    from quarl_bench.deploy.parity import claimed_spec
    from quarl_bench.deploy.targets import BACKENDS
    from quarl_bench.precision import precision

    BACKENDS.get(backend)  # an unknown name: one line naming the registered ones
    claim = claimed_spec(backend)
    if not precision(claim.precision).is_int:
        integer = [name for name in BACKENDS.names() if precision(claimed_spec(name).precision).is_int]
        raise QuarlError(
            f"bad --for {backend}: its artifact runs at {claim.precision}, which has no claim to harden for; "
            f"expected one of {', '.join(integer)}"
        )
    for name, value in given.items():
        wanted = getattr(claim, name)
        if str(value) != str(wanted):
            raise QuarlError(
                f"--{name.replace('_', '-').replace('precision', 'bits')} {value} contradicts --for {backend}, "
                f"which claims {name.replace('_', ' ')} {wanted or 'none'}: drop the flag or the --for"
            )
    return claim
