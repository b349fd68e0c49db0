"""Evaluating one agent: PTQ rows, certification, mixed-precision search, closed-loop fidelity."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quarl_bench.api.agents import AgentQuery, acting_layer_names, factory_env_id, resolve
from quarl_bench.errors import QuarlError
from quarl_bench.types import AgentRef, QuantSpec

if TYPE_CHECKING:
    import pandas as pd

    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.certify.result import Certification, Verdict
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.store import ResultStore


def evaluate_agent(
    model: Any,
    env: str | Callable[[], Any],
    precisions: Sequence[str | int] = ("fp32", "int8"),
    episodes: int = 100,
    seed: int = 0,
    store: str | os.PathLike | None = None,
    *,
    algo: str | None = None,
    vecnormalize: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    env_packages: Sequence[str] = (),
    n_envs: int | None = None,
    cache: str | os.PathLike = "results/agents",
) -> pd.DataFrame:
    """Post-training quantize ``model`` at each precision and evaluate it against fp32 on ``episodes`` seeded
    episodes; the same rows (and numbers) as ``quarl-bench run``.

    :param model: a path to an SB3 ``.zip`` or an ``.onnx`` file, a loaded SB3 model, or a ``torch.nn.Module``
        mapping observations to logits (discrete) or actions (continuous).
    :param env: an env id or alias (``module:EnvId-v0`` too), or a function returning a gymnasium env.
    :param precisions: ``fp32``, ``fp16``, ``bf16`` or integer bit widths 2-32.
    :param store: a results store to keep (and reuse) the rows in; None: a temporary one.
    :return: one row per precision (``E %`` against the fp32 row), as :func:`quarl_bench.store.results.load_results`
        gives them.
    """
    import tempfile

    import pandas as pd

    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.store import ResultStore
    from quarl_bench.store.results import results_frame

    env_name = factory_env_id(env) if callable(env) and not isinstance(env, str) else str(env)
    path = str(model) if isinstance(model, str | os.PathLike) else model
    query = AgentQuery(env_name, algo, path, None, vecnormalize, env_kwargs, tuple(env_packages), cache=str(cache))
    ref = resolve(query)
    specs = tuple(QuantSpec(str(p)) for p in precisions)
    settings = EvalSettings(episodes, seed, n_envs)
    with tempfile.TemporaryDirectory() as scratch:
        with ResultStore(store or Path(scratch) / "quarl.sqlite") as opened:
            rows = pd.DataFrame(run_ptq(ref, specs, settings, opened))  # this agent's rows only, not the store
            rows["agent"] = rows["agent_hash"].map(opened.agent_names())
        return results_frame(rows)


def refuse_unfit_specs(ref: AgentRef, specs: Sequence[QuantSpec]) -> None:
    """Before any row is stored: calibrated PTQ of an ONNX graph that is no MLP chain, and ``--state-bits`` for a
    policy without state.

    :raises QuarlError: naming what does not fit.
    """
    from quarl_bench.zoo.algorithms import RECURRENT
    from quarl_bench.zoo.forms import carries_state, form_of

    if any(spec.calibrated or spec.activations for spec in specs):
        form_of(ref).refuse_calibrated(ref)  # an ONNX graph calibrates only through its torch twin
    state_bits = next((spec.state_bits for spec in specs if spec.state_bits), "")
    if state_bits and not carries_state(ref):
        raise QuarlError(
            f"--state-bits {state_bits}: {ref.algo} {ref.env_id}'s policy carries no recurrent state (expected a "
            f"recurrent policy: {', '.join(RECURRENT)})"
        )


def refuse_per_layer(ref: AgentRef, command: str) -> None:
    """Before any row is stored: per-layer precisions index the acting layers, which a recurrent policy's LSTM is
    not one of.

    :raises QuarlError: for a recurrent agent.
    """
    from quarl_bench.zoo.forms import carries_state

    if carries_state(ref):
        raise QuarlError(
            f"{command}: {ref.algo} {ref.env_id}'s LSTM is not one of the acting layers per-layer precisions index "
            "(expected a feed-forward policy; quantize a recurrent one with run or certify --bits P)"
        )


def run_ptq(
    ref: AgentRef,
    specs: tuple[QuantSpec, ...],
    settings: EvalSettings,
    store: ResultStore,
    force: bool = False,
    eval_workers: int = 1,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate the agent at fp32 and each spec (stored jobs reused unless ``force``); the stored rows."""
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.ptq import PTQConfig
    from quarl_bench.run.runner import run_work
    from quarl_bench.store.provenance import driver_provenance

    store.check()
    refuse_unfit_specs(ref, specs)
    calibrated_rounding = sorted({spec.ptq for spec in specs if spec.ptq != "rtn"})
    if calibrated_rounding and not acting_layer_names(ref):  # before any row is stored
        raise QuarlError(
            f"--ptq {calibrated_rounding[0]}: {ref.env_id}'s policy has no quantizable layer "
            "(expected Linear or Conv layers)"
        )
    work = Work(PTQConfig(ref, specs), settings, driver=driver_provenance(), eval_workers=eval_workers)
    return run_work(work, store, force=force, on_result=on_result)


def run_sensitivity(
    ref: AgentRef,
    bits: Sequence[str],
    settings: EvalSettings,
    store: ResultStore,
    force: bool = False,
    eval_workers: int = 1,
    on_plan: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Each acting layer quantized alone at each of ``bits`` (the others fp32), next to the fp32 reference; the
    stored rows. ``on_plan(layers, evaluations)`` before the first evaluation."""
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.mixed import sensitivity_specs
    from quarl_bench.methods.ptq import PTQConfig
    from quarl_bench.run.runner import run_work
    from quarl_bench.store.provenance import driver_provenance

    store.check()
    refuse_per_layer(ref, "sensitivity")
    specs = tuple(sensitivity_specs(len(acting_layer_names(ref)), list(bits)))
    if on_plan:
        on_plan(len(acting_layer_names(ref)), len(specs))
    work = Work(PTQConfig(ref, specs), settings, driver=driver_provenance(), eval_workers=eval_workers)
    return run_work(work, store, force=force)


def certify_agent(
    model: Any,
    specs: Sequence[QuantSpec | str | int] = ("fp16", "int8", "int6", "int5", "int4", "int3", "int2"),
    config: CertifyConfig | None = None,
    store: ResultStore | str | os.PathLike | None = None,
    *,
    env: str | None = None,
    force: bool = False,
    on_verdict: Callable[[Verdict], None] | None = None,
    baseline: AgentRef | None = None,
    by: str = "ptq",
) -> Certification:
    """Certify each precision safe, unsafe or undetermined for an agent (see :mod:`quarl_bench.certify.plan`): the
    convenience wrapper of :func:`certify` for one agent.

    :param model: a resolved :class:`AgentRef`, or a path to an SB3 zip / ONNX file (then ``env`` is needed).
    :param specs: QuantSpecs or precision names, in any order (walked from the widest down).
    :param config: a :class:`~quarl_bench.certify.plan.CertifyConfig` (default: 5% of R_fp32 - R_random, 95%).
    :param store: a :class:`~quarl_bench.store.ResultStore` or a path; None: ``results/quarl.sqlite``.
    :param baseline: the agent whose fp32 the differences and δ come from (a hardened agent's parent: see
        :func:`quarl_bench.methods.harden.parent_of`); fp32 is then certified too. None: the agent's own fp32.
    :param by: the method whose evaluator plays each question (``certify --method``).
    :return: a :class:`~quarl_bench.certify.result.Certification`: ``minimum_safe``, ``verdicts``, ``as_json()``.
    """
    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.store import DEFAULT_STORE, ResultStore

    config = config or CertifyConfig()
    if isinstance(model, str | os.PathLike):
        if env is None:
            raise QuarlError("certify_agent on a policy file needs env: expected an env id such as 'CartPole-v1'")
        model = resolve(AgentQuery(env, model=str(model)))
    asked = tuple(spec if isinstance(spec, QuantSpec) else QuantSpec(str(spec)) for spec in specs)
    request = certify_request(model, asked, config, baseline, by)
    told = (lambda _agent, found: on_verdict(found)) if on_verdict else None
    if isinstance(store, ResultStore):
        return certify([request], store, on_verdict=told, force=force)[0]
    with ResultStore(store or DEFAULT_STORE) as opened:
        return certify([request], opened, on_verdict=told, force=force)[0]


@dataclass(frozen=True)
class MixedSearch:
    """What :func:`search_mixed` found: the allocation (one precision per acting layer), the layers least sensitive
    first, the fp32 reward on the search seeds and the floor it had to stay above, the allocations tried (with
    their reward), and the verification rows (the allocation next to uniform PTQ on fresh seeds)."""

    layer_names: list[str]
    allocation: tuple[str, ...]
    order: list[int]
    fp32_reward: float
    floor: float  # the fp32 reward on the search seeds minus the certification's tolerance δ
    tried: list[tuple[tuple[str, ...], Any]]  # each allocation certified, with its Verdict
    rows: list[dict[str, Any]]


def mixed_ladder(bits: Sequence[str], search_seeds: Sequence[int], verify_seeds: Sequence[int]) -> list[str]:
    """The candidate precisions below fp32, widest first.

    :raises QuarlError: for no precision below fp32, or verify seeds that overlap the search seeds.
    """
    from quarl_bench.precision import precision_bits

    ladder = sorted(dict.fromkeys(p for p in bits if p != "fp32"), key=lambda p: -precision_bits(p))
    if not ladder:
        raise QuarlError(f"bad --bits {' '.join(bits)}: expected precisions below fp32 such as fp16 8 6 4 2")
    if set(verify_seeds) & set(search_seeds):
        raise QuarlError(
            f"bad --verify-seeds {' '.join(map(str, verify_seeds))}: expected seeds not in "
            f"--search-seeds ({' '.join(map(str, search_seeds))})"
        )
    return ladder


def search_mixed(
    ref: AgentRef,
    ladder: Sequence[str],
    tolerance_pct: float,
    episodes: int,
    search_seeds: Sequence[int],
    verify_seeds: Sequence[int],
    store: ResultStore,
    n_envs: int | None = None,
    on_try: Callable[[tuple[str, ...], Any], None] | None = None,
    certify_config: CertifyConfig | None = None,
) -> MixedSearch:
    """Greedy per-layer bit allocation (layers ranked by their one-layer sensitivity on the search seeds), each step
    accepted only when certification says the allocation is safe within ``tolerance_pct``% of (R_fp32 - R_random)
    (an undetermined step is rejected); the allocation found is verified on fresh seeds next to uniform PTQ. Every
    evaluation and verdict is stored (method ``mixed`` for the verified allocation), so a search resumes.

    :param certify_config: a :class:`~quarl_bench.certify.plan.CertifyConfig` for the steps (its tolerance and seed
        are set from ``tolerance_pct`` and the first search seed); default 95% confidence, at most 200 episodes.
    :raises QuarlError: for an empty ladder, verify seeds that overlap the search seeds, or a bad tolerance.
    """
    import numpy as np
    import pandas as pd

    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.mixed import greedy_allocation, rank_layers, sensitivity_specs
    from quarl_bench.methods.ptq import PTQConfig
    from quarl_bench.report.layers import sensitivity_frame
    from quarl_bench.run.runner import run_work
    from quarl_bench.store.provenance import driver_provenance

    ladder = mixed_ladder(ladder, search_seeds, verify_seeds)
    config = replace(certify_config or CertifyConfig(max_episodes=200), tolerance=tolerance_pct, seed=search_seeds[0])
    store.check()
    refuse_per_layer(ref, "mixed")
    driver = driver_provenance()
    names = acting_layer_names(ref)
    search = EvalSettings(episodes, seeds=tuple(search_seeds), n_envs=n_envs)

    def evaluated(
        specs: list[QuantSpec], settings: EvalSettings, mixed: tuple[QuantSpec, ...] = ()
    ) -> list[dict[str, Any]]:
        return run_work(Work(PTQConfig(ref, tuple(specs), mixed), settings, driver=driver), store)

    rows = evaluated(sensitivity_specs(len(names), ladder), search)
    fp32 = float(np.mean([r for row in rows if row["key"] == row["reference_key"] for r in row["episode_rewards"]]))
    sensitivity = sensitivity_frame(pd.DataFrame(rows))
    errors = {(int(r["layer"]), r["precision"]): float(r["E %"]) for _, r in sensitivity.iterrows()}
    order = rank_layers(errors, len(names))
    tried: list[tuple[tuple[str, ...], Any]] = []

    def acceptable(allocation: tuple[str, ...]) -> bool:
        spec = QuantSpec(layer_precisions=allocation)
        if spec.is_identity:  # every layer fp32: the reference itself
            return True
        found = certify([certify_request(ref, (spec,), config)], store, driver)[0].verdicts[0]
        tried.append((allocation, found))
        if on_try:
            on_try(allocation, found)
        return found.verdict == "safe"

    allocation, _ = greedy_allocation(order, ladder, acceptable, len(names))
    verify = EvalSettings(episodes, seeds=tuple(verify_seeds), n_envs=n_envs)
    found = QuantSpec(layer_precisions=allocation)
    rows = evaluated([QuantSpec(p) for p in ladder], verify, mixed=(found,))
    delta = tried[0][1].delta if tried else float("nan")
    return MixedSearch(names, tuple(allocation), order, fp32, fp32 - delta, tried, rows)


def measure_fidelity(
    ref: AgentRef,
    specs: Sequence[QuantSpec],
    settings: EvalSettings,
    threshold: float,
    store: ResultStore,
    force: bool = False,
) -> Any:
    """Play the fp32 and each quantized policy side by side from the same seeds (one episode per env) and store,
    per episode, the first step whose greedy actions differ and the first whose observations part by more than
    ``threshold`` (``methods/fidelity.py``); returns the stored fidelity rows of these jobs."""
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.fidelity import FidelityConfig
    from quarl_bench.run.runner import run_work
    from quarl_bench.store.provenance import driver_provenance

    store.check()
    refuse_unfit_specs(ref, specs)
    work = Work(FidelityConfig(ref, tuple(specs), threshold), settings, driver=driver_provenance())
    keys = [row["key"] for row in run_work(work, store, force=force)]
    frame = store.fidelity()
    return frame[frame["key"].isin(keys)]


def certify_request(
    ref: AgentRef,
    specs: Sequence[QuantSpec],
    config: CertifyConfig,
    baseline: AgentRef | None = None,
    by: str = "ptq",
    conditions: int = 1,
) -> Any:
    """One agent's certification: its specs walked by family, each widest first (against a ``baseline``, its own fp32
    first, alone); α split over the families, and over ``conditions`` (a severity grid's: one request each, the
    family-wise α shared by all); each question played by method ``by`` (one with an evaluator)."""
    from quarl_bench.certify.plan import CertifyRequest, ladders
    from quarl_bench.jobs.spec_options import check_spec_options
    from quarl_bench.methods.protocol import config_type, evaluated_methods

    playable = [m for m in evaluated_methods() if m != "deploy"]  # an artifact is certified by export
    if by != "ptq" and by not in playable:
        raise QuarlError(
            f"bad method {by!r} for certify: expected one with an evaluator of its own, one of {', '.join(playable)}"
        )
    for spec in specs:  # before anything is played: what the method would not apply
        check_spec_options(by, getattr(config_type(by), "spec_flags", ()), spec)
    refuse_unfit_specs(ref, specs)
    if config.perturb:
        from dataclasses import replace

        from quarl_bench.evaluation.perturbations import condition_for

        config = replace(config, perturb=condition_for(config.perturb, ref.env_id))
    if config.outcome != "return":
        from quarl_bench.certify.outcome import outcome_rule

        probe_outcome(ref, config.outcome, outcome_rule(config.outcome, config.success, config.progress))
    if baseline is not None and not any(spec.is_identity for spec in specs):
        specs = (QuantSpec("fp32"), *specs)
    walks = ladders(tuple(specs), keep_fp32=baseline is not None, by=by, equivalence=config.equivalence)
    return CertifyRequest(ref, walks, config, baseline, families=len(walks) * conditions)


def probe_outcome(ref: AgentRef, outcome: str, rule: str) -> None:
    """One step of the agent's env before anything is played: it must report what ``outcome`` reads.

    :raises QuarlError: naming the info key the env does not report.
    """
    import json

    from quarl_bench.certify.outcome import probe_reports
    from quarl_bench.zoo.envs import import_env_packages, register_env, register_env_packages

    register_env_packages()
    import_env_packages(ref.env_packages)
    register_env(ref.env_id)
    probe_reports(ref.env_id, json.loads(ref.env_kwargs) if ref.env_kwargs else {}, outcome, rule)


def certify(
    requests: Sequence[Any],
    store: ResultStore,
    driver: dict[str, Any] | None = None,
    on_verdict: Callable[[AgentRef, Any], None] | None = None,
    force: bool = False,
    executor: Any = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Any]:
    """The one certification call: many agents' requests (:func:`certify_request`) side by side
    (``certify_driver.certify_all``) on ``executor`` (default: this process), every batch row and verdict stored;
    one :class:`~quarl_bench.certify.result.Certification` per request, in order. ``driver``: the provenance its
    rows carry (default: this process's command and code).
    ``on_verdict(agent, verdict)`` as each verdict is decided or found stored; ``on_progress(done, total)`` as each
    question is answered or left unasked."""
    from quarl_bench.certify.driver import certify_all
    from quarl_bench.certify.result import Certification, Verdict
    from quarl_bench.errors import note
    from quarl_bench.run.executors import make_executor

    def decided(number: int, found: Any) -> None:
        if on_verdict:
            on_verdict(requests[number].ref, Verdict.from_row(found.row, found.reused))

    for request in requests:
        if old := store.unpaired_rows(request.ref.content_hash):
            note(
                f"note: {old} stored rows of this agent carry no episode identity (stored before it was recorded); "
                "they are never paired with new ones, so certify evaluates afresh"
            )

    from quarl_bench.store.provenance import driver_provenance

    store.check()
    executor = executor or make_executor("local", store, 1)
    outcomes = certify_all(list(requests), store, executor, driver or driver_provenance(), force, decided, on_progress)
    results = []
    for outcome in outcomes:
        scale = outcome.scale
        assert scale is not None  # every request's scale walk has ended when certify_all returns
        result = Certification(outcome.request.ref, scale.delta, scale.text, scale.rows)
        for found in outcome.verdict_rows():
            verdict = Verdict.from_row(found.row, found.reused)
            result.verdicts.append(verdict)
            result.family_of[verdict.spec] = found.family
        results.append(result)
    return results
