"""The application layer: functions that take plain values and return data, one per thing a command does.

The CLI (``cli.py`` -> ``commands/``) parses arguments, calls one of these and renders what it returns; Python
callers use them directly. ``evaluate_agent`` is the one-call entry point (lm-evaluation-harness's
``simple_evaluate`` shape): a path, a loaded SB3 model or a torch module, on an env id or factory.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from quarl_bench.errors import QuarlError
from quarl_bench.types import AgentRef, QuantSpec


@dataclass(frozen=True)
class AgentQuery:
    """Where one agent comes from: the zoo (``algo``), a policy file (``model``: SB3 zip or ONNX) or a torch module
    (``policy_module``: ``FILE.py:FUNCTION``), on ``env`` (an id, an alias or ``module:EnvId-v0``).

    :param vecnormalize: normalisation statistics for a ``model`` zip.
    :param env_kwargs: keyword arguments for the env (override the saved ones).
    :param env_packages: modules imported before the env is made.
    :param folder: rl-zoo3 log folder (default ``$QUARL_ZOO``); ``cache``: trained and downloaded agents.
    """

    env: str
    algo: str | None = None
    model: str | None = None
    policy_module: str | None = None
    vecnormalize: str | None = None
    env_kwargs: dict[str, Any] | None = None
    env_packages: tuple[str, ...] = ()
    folder: str | None = None
    cache: str | None = None
    use_hub: bool = True
    train_if_missing: bool = False
    seed: int = 0
    trust_remote_code: bool = False


def find_agent(query: AgentQuery) -> AgentRef:
    """Resolve a query to a loadable agent.

    :raises QuarlError: for a bad env, package, file or missing agent, in one line.
    """
    from quarl_bench.zoo.agents import DEFAULT_CACHE, resolve_agent
    from quarl_bench.zoo.envs import env_with_packages
    from quarl_bench.zoo.model_file import model_ref, module_ref

    if query.model and query.policy_module:
        raise QuarlError("bad agent: expected --model or --policy-module, not both")
    env_id, packages = env_with_packages(query.env, query.env_packages)
    if query.model:
        return model_ref(query.model, env_id, query.algo, query.vecnormalize, query.env_kwargs, packages)
    if query.policy_module:
        return module_ref(query.policy_module, env_id, packages)
    if query.vecnormalize or query.env_kwargs:
        raise QuarlError("bad agent: --vecnormalize and --env-kwargs apply to a --model file; zoo agents use theirs")
    if not query.algo:
        raise QuarlError("no agent given: expected --algo (a zoo agent), --model FILE or --policy-module FILE.py:FUNC")
    return resolve_agent(
        query.algo,
        env_id,
        query.folder,
        query.cache or DEFAULT_CACHE,
        query.use_hub,
        query.train_if_missing,
        query.seed,
        query.trust_remote_code,
    )


def acting_layer_names(ref: AgentRef) -> list[str]:
    """The agent's acting layers (what per-layer precisions refer to), in module order."""
    from quarl_bench.quant.quantize import acting_layer_names as names
    from quarl_bench.zoo.agents import load_agent

    return names(load_agent(ref).model.policy)


def _object_ref(model: Any, env_id: str, packages: tuple[str, ...], cache: Path) -> AgentRef:
    """An in-memory SB3 model (saved once to ``cache/objects/{hash}.zip``) or torch module (kept in this process)
    as an agent; its identity is the hash of its weights."""
    import torch
    from stable_baselines3.common.base_class import BaseAlgorithm

    from quarl_bench.zoo.foreign import register_module
    from quarl_bench.zoo.model_file import algo_of_zip, model_ref, weights_hash
    from quarl_bench.zoo.sb3_zip import saved_data

    if isinstance(model, BaseAlgorithm):
        state = model.policy.state_dict()
    elif isinstance(model, torch.nn.Module):
        state = model.state_dict()
    else:
        raise QuarlError(
            f"bad model {type(model).__name__}: expected a path (.zip or .onnx), an SB3 model or a torch.nn.Module"
        )
    key = weights_hash(state, type(model).__qualname__.encode())
    if isinstance(model, torch.nn.Module):
        return AgentRef(
            "torch-module", env_id, env_id, "object", "", key, register_module(key, model), "", "", packages
        )
    path = cache / "objects" / f"{key}.zip"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{key}.partial.zip")
        model.save(partial)
        os.replace(partial, path)
    return model_ref(path, env_id, algo_of_zip(saved_data(path), path), env_packages=packages)


def _factory_env(env: Callable[[], Any]) -> str:
    """Register an env factory under a gymnasium id of its own (so the evaluation, like rl-zoo3, makes it by id):
    ``factory/{the id of the env it makes}-{hash of its code}-v0``, the same in every process (a lambda's repr
    holds its address), and named after the env a person asked for."""
    import re

    import gymnasium as gym

    probe = env()
    made = probe.spec.id if probe.spec is not None else type(probe.unwrapped).__name__
    probe.close()
    digest = hashlib.sha256(_code_identity(env)).hexdigest()[:8]
    env_id = f"factory/{re.sub(r'[^A-Za-z0-9_.-]', '_', made)}-{digest}-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=env)
    return env_id


def _code_identity(function: Any) -> bytes:
    """What a factory does, as bytes: its module, name, bytecode and constants (nested code objects by theirs)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return repr(type(function)).encode()

    def of(code_object: Any) -> bytes:
        parts = [code_object.co_code, repr(code_object.co_names).encode()]
        for constant in code_object.co_consts:
            parts.append(of(constant) if hasattr(constant, "co_code") else repr(constant).encode())
        return b"|".join(parts)

    return f"{function.__module__}.{function.__qualname__}".encode() + of(code)


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
) -> Any:
    """Post-training quantize ``model`` at each precision and evaluate it against fp32 on ``episodes`` seeded
    episodes; the same rows (and numbers) as ``quarl-bench run``.

    :param model: a path to an SB3 ``.zip`` or an ``.onnx`` file, a loaded SB3 model, or a ``torch.nn.Module``
        mapping observations to logits (discrete) or actions (continuous).
    :param env: an env id or alias (``module:EnvId-v0`` too), or a function returning a gymnasium env.
    :param precisions: ``fp32``, ``fp16``, ``bf16`` or integer bit widths 2-32.
    :param store: a results store to keep (and reuse) the rows in; None: a temporary one.
    :return: one row per precision (``E %`` against the fp32 row), as :func:`quarl_bench.results.load_results`
        gives them.
    """
    import tempfile

    from quarl_bench.registry import EvalSettings
    from quarl_bench.results import results_frame
    from quarl_bench.store import ResultStore
    from quarl_bench.zoo.envs import env_with_packages

    env_name = _factory_env(env) if callable(env) and not isinstance(env, str) else str(env)
    if isinstance(model, str | os.PathLike):
        ref = find_agent(AgentQuery(env_name, algo, str(model), None, vecnormalize, env_kwargs, tuple(env_packages)))
    else:
        env_id, packages = env_with_packages(env_name, tuple(env_packages))
        ref = _object_ref(model, env_id, packages, Path(cache))
    specs = tuple(QuantSpec(p) for p in precisions)
    settings = EvalSettings(episodes, seed, n_envs)
    with tempfile.TemporaryDirectory() as scratch:
        with ResultStore(store or Path(scratch) / "quarl.sqlite") as opened:
            keys = [row["key"] for row in run_ptq(ref, specs, settings, opened)]
            stored = opened.to_dataframe().set_index("key", drop=False)
        return results_frame(stored.loc[keys].reset_index(drop=True))


def run_ptq(
    ref: AgentRef,
    specs: tuple[QuantSpec, ...],
    settings: Any,
    store: Any,
    force: bool = False,
    eval_workers: int = 1,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate the agent at fp32 and each spec (stored jobs reused unless ``force``); the stored rows."""
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.quant.quantize import ONNX_REFUSAL
    from quarl_bench.runner import Work, run_work

    store.check()
    if ref.algo == "onnx" and any(spec.calibrated or spec.activations for spec in specs):  # before any row is stored
        raise QuarlError(ONNX_REFUSAL)
    calibrated_rounding = sorted({spec.ptq for spec in specs if spec.ptq != "rtn"})
    if calibrated_rounding and not acting_layer_names(ref):  # before any row is stored
        raise QuarlError(
            f"--ptq {calibrated_rounding[0]}: {ref.env_id}'s policy has no quantizable layer "
            "(expected Linear or Conv layers)"
        )
    work = Work(
        "ptq", ref.algo, ref.env_id, specs, settings, ref, driver=driver_provenance(), eval_workers=eval_workers
    )
    return run_work(work, store, force=force, on_result=on_result)


def certify_agent(
    model: Any,
    specs: Sequence[QuantSpec | str | int] = ("fp16", "int8", "int6", "int5", "int4", "int3", "int2"),
    config: Any = None,
    store: Any = None,
    *,
    env: str | None = None,
    force: bool = False,
    on_verdict: Callable[[Any], None] | None = None,
) -> Any:
    """Certify each precision safe, unsafe or undetermined for an agent (see :mod:`quarl_bench.methods.certify`).

    :param model: a resolved :class:`AgentRef`, or a path to an SB3 zip / ONNX file (then ``env`` is needed).
    :param specs: QuantSpecs or precision names, in any order (walked from the widest down).
    :param config: a :class:`~quarl_bench.methods.certify.CertifyConfig` (default: 5% of R_fp32 - R_random, 95%).
    :param store: a :class:`~quarl_bench.store.ResultStore` or a path; None: ``results/quarl.sqlite``.
    :return: a :class:`~quarl_bench.methods.certify.Certification`: ``minimum_safe``, ``verdicts``, ``as_json()``.
    """
    from quarl_bench.methods.certify import CertifyConfig
    from quarl_bench.store import DEFAULT_STORE, ResultStore

    config = config or CertifyConfig()
    if isinstance(model, str | os.PathLike):
        if env is None:
            raise QuarlError("certify_agent on a policy file needs env: expected an env id such as 'CartPole-v1'")
        model = find_agent(AgentQuery(env, model=str(model)))
    specs = tuple(spec if isinstance(spec, QuantSpec) else QuantSpec(str(spec)) for spec in specs)
    if isinstance(store, ResultStore):
        return _certify_in(model, specs, config, store, force, on_verdict)
    with ResultStore(store or DEFAULT_STORE) as opened:
        return _certify_in(model, specs, config, opened, force, on_verdict)


def _certify_in(ref: AgentRef, specs: tuple, config: Any, store: Any, force: bool, on_verdict) -> Any:
    import sys

    from quarl_bench.methods.certify import certify_specs
    from quarl_bench.provenance import driver_provenance

    store.check()
    if ref.algo == "onnx" and any(spec.calibrated or spec.activations for spec in specs):
        from quarl_bench.quant.quantize import ONNX_REFUSAL

        raise QuarlError(ONNX_REFUSAL)
    old = store.unpaired_rows(ref.content_hash)
    if old:
        print(
            f"quarl-bench: note: {old} stored rows of this agent carry no episode identity (stored before it was "
            "recorded); they are never paired with new ones, so certify evaluates afresh",
            file=sys.stderr,
        )
    return certify_specs(ref, specs, config, store, driver_provenance(), on_verdict, force)


def run_deploy(
    ref: AgentRef,
    specs: tuple[QuantSpec, ...],
    settings: Any,
    store: Any,
    force: bool = False,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
    on_error: Callable[[str, str], None] | None = None,
) -> list[dict[str, Any]]:
    """Build, play, time and weigh each deployment backend's artifact (torch-fp32, the reference, always); a
    backend that cannot run here is reported through ``on_error(backend, reason)`` and the others still run."""
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.runner import Work, run_work

    store.check()
    driver = driver_provenance()
    rows: dict[str, dict[str, Any]] = {}
    for spec in specs:
        work = Work("deploy", ref.algo, ref.env_id, (spec,), settings, ref, driver=driver)
        try:
            for row in run_work(work, store, force, on_result):
                rows[row["key"]] = row
        except Exception as error:  # noqa: BLE001 - ONNX Runtime, torchao and onnx raise many types
            text = str(error).strip()
            if on_error:
                on_error(spec.backend, f"{type(error).__name__}: {text.splitlines()[0] if text else ''}")
    return list(rows.values())


def export_artifact(ref: AgentRef, spec: QuantSpec, out: Path) -> tuple[Any, Path]:
    """Write ``spec.backend``'s artifact of the agent to ``out`` and a README beside it, each whole or not at all.

    :raises QuarlError: for an unwritable path or a backend with no standalone format.
    """
    from quarl_bench.deploy.artifact_readme import artifact_readme
    from quarl_bench.deploy.backends import build
    from quarl_bench.deploy.export import deployable, split_normalizer
    from quarl_bench.methods.deploy import CALIBRATION_SEED_OFFSET, deploy_calibration_states
    from quarl_bench.zoo.agents import load_agent

    if out.is_dir() or not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
        raise QuarlError(f"cannot write {str(out)!r}: expected a file path in an existing, writable folder")
    agent = load_agent(ref)
    env = agent.make_env(1, 0)
    raw, normalizer = split_normalizer(env)
    module = deployable(agent.model.policy, raw.observation_space, normalizer)
    env.close()
    calibration = (
        deploy_calibration_states(agent, spec.calibration_states, CALIBRATION_SEED_OFFSET)
        if spec.calibration_states
        else None
    )
    sample = (
        calibration[:1] if calibration is not None else deploy_calibration_states(agent, 1, CALIBRATION_SEED_OFFSET)
    )
    artifact = build(spec.backend, module, sample, calibration, spec.calibration_method or "minmax")
    if not artifact.standalone:
        raise QuarlError(
            f"backend {spec.backend} has no standalone artifact format: expected an ort-* or torch-fp32 backend"
        )
    readme = out.with_name(out.name + ".README.md")
    text = artifact_readme(artifact, ref, module, raw.observation_space, out.name, spec)
    for path, data in ((out, artifact.data), (readme, text.encode())):  # each written whole, then renamed
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(data)
        os.replace(partial, path)
    return artifact, readme


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
    store: Any,
    n_envs: int | None = None,
    on_try: Callable[[tuple[str, ...], Any], None] | None = None,
    certify: Any = None,
) -> MixedSearch:
    """Greedy per-layer bit allocation (layers ranked by their one-layer sensitivity on the search seeds), each step
    accepted only when certification says the allocation is safe within ``tolerance_pct``% of (R_fp32 - R_random)
    (an undetermined step is rejected); the allocation found is verified on fresh seeds next to uniform PTQ. Every
    evaluation and verdict is stored (method ``mixed`` for the verified allocation), so a search resumes.

    :param certify: a :class:`~quarl_bench.methods.certify.CertifyConfig` for the steps (its tolerance and seed
        are set from ``tolerance_pct`` and the first search seed); default 95% confidence, at most 200 episodes.
    :raises QuarlError: for an empty ladder, verify seeds that overlap the search seeds, or a bad tolerance.
    """
    import numpy as np
    import pandas as pd

    from quarl_bench.methods.certify import Certifier, CertifyConfig, certify_specs
    from quarl_bench.methods.mixed import greedy_allocation, rank_layers, sensitivity_specs
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.registry import EvalSettings
    from quarl_bench.report.layers import sensitivity_frame
    from quarl_bench.runner import Work, run_work

    ladder = mixed_ladder(ladder, search_seeds, verify_seeds)
    config = replace(certify or CertifyConfig(max_episodes=200), tolerance=tolerance_pct, seed=search_seeds[0])
    store.check()
    driver = driver_provenance()
    names = acting_layer_names(ref)
    search = EvalSettings(episodes, seeds=tuple(search_seeds), n_envs=n_envs)

    def evaluated(specs: list[QuantSpec], settings: EvalSettings) -> list[dict[str, Any]]:
        return run_work(Work("ptq", ref.algo, ref.env_id, tuple(specs), settings, ref, driver=driver), store)

    rows = evaluated(sensitivity_specs(len(names), ladder), search)
    fp32 = float(np.mean([r for row in rows if row["key"] == row["reference_key"] for r in row["episode_rewards"]]))
    sensitivity = sensitivity_frame(pd.DataFrame(rows))
    errors = {(int(r["layer"]), r["precision"]): float(r["E %"]) for _, r in sensitivity.iterrows()}
    order = rank_layers(errors, len(names))
    tried: list[tuple[tuple[str, ...], Any]] = []
    certifier = Certifier(ref, config, store, driver)

    def acceptable(allocation: tuple[str, ...]) -> bool:
        spec = QuantSpec(layer_precisions=allocation)
        if spec.is_identity:  # every layer fp32: the reference itself
            return True
        found = certify_specs(ref, (spec,), config, store, driver, certifier=certifier).verdicts[0]
        tried.append((allocation, found))
        if on_try:
            on_try(allocation, found)
        return found.verdict == "safe"

    allocation, _ = greedy_allocation(order, ladder, acceptable, len(names))
    verify = EvalSettings(episodes, seeds=tuple(verify_seeds), n_envs=n_envs)
    found = QuantSpec(method="mixed", layer_precisions=allocation)
    rows = evaluated([found, *(QuantSpec(p) for p in ladder)], verify)
    delta = tried[0][1].delta if tried else float("nan")
    return MixedSearch(names, tuple(allocation), order, fp32, fp32 - delta, tried, rows)


def measure_fidelity(
    ref: AgentRef, specs: Sequence[QuantSpec], settings: Any, threshold: float, store: Any, force: bool = False
) -> Any:
    """Play the fp32 and each quantized policy side by side from the same seeds (one episode per env) and store,
    per episode, the first step whose greedy actions differ and the first whose observations part by more than
    ``threshold``; returns the stored fidelity rows of these jobs."""
    from datetime import datetime, timezone

    from quarl_bench.evaluation.fidelity import side_by_side
    from quarl_bench.provenance import agent_provenance, driver_provenance
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.registry import build_jobs
    from quarl_bench.zoo.agents import load_agent

    store.check()
    agent, keys = None, []
    for job in build_jobs(ref, list(specs), settings):
        key = hashlib.sha256(f"{job.key}:{threshold!r}".encode()).hexdigest()[:24]
        keys.append(key)
        if not force and store.has_fidelity(key):
            continue
        agent = agent or load_agent(ref)
        policy, _ = quantize(agent.model.policy, job.spec)
        reference_env, env = agent.make_env(job.n_envs, job.seed), agent.make_env(job.n_envs, job.seed)
        try:
            found = side_by_side(agent.model.policy, policy, reference_env, env, threshold, job.obs_noise, job.seed)
        finally:
            reference_env.close()
            env.close()
        store.put_fidelity(
            {
                "key": key,
                "job_key": job.key,
                "algo": ref.algo,
                "env_id": ref.env_id,
                "precision": job.spec.precision,
                "agent_hash": ref.content_hash,
                "seed": job.seed,
                "episodes": job.episodes,
                "threshold": threshold,
                "obs_noise": job.obs_noise,
                "first_action": found.first_action,
                "first_obs": found.first_obs,
                "lengths": found.lengths,
                "provenance": driver_provenance() | agent_provenance(ref),
                "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            },
            replace=True,
        )
    frame = store.fidelity()
    return frame[frame["key"].isin(keys)]


def time_table4(
    policies: Sequence[str],
    backends: Sequence[str],
    calls: int,
    store: Any,
    force: bool = False,
    on_error: Callable[[str, str, str], None] | None = None,
) -> Any:
    """QuaRL Table 4's synthetic policies timed per backend (torch-fp32, the reference, always) on this machine,
    batch 1 on one thread; a timing already stored for this machine and these versions is reused unless ``force``.
    Returns the comparison with the paper's figures (:func:`quarl_bench.report.deployment.table4_comparison`)."""
    import pandas as pd

    from quarl_bench.config import config_dir
    from quarl_bench.deploy.synthetic import machine, time_policy, timing_key
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.report.deployment import table4_comparison

    store.check()
    host, driver = machine(), driver_provenance()
    keys = []
    for policy in policies:
        for backend in dict.fromkeys(["torch-fp32", *backends]):
            key = timing_key(policy, backend, calls, host, driver["versions"])
            if store.has_timing(key) and not force:
                keys.append(key)
                continue
            try:
                row = time_policy(policy, backend, calls, key, driver | {"host": host})
            except Exception as error:  # noqa: BLE001 - ONNX Runtime, torchao and onnx raise many types
                text = str(error).strip()
                if on_error:
                    on_error(policy, backend, f"{type(error).__name__}: {text.splitlines()[0] if text else ''}")
                continue
            store.put_timing(row, replace=True)
            keys.append(key)
    timings = store.timings()
    paper = pd.read_csv(config_dir() / "paper" / "quarl_table4_deployment.csv")
    return table4_comparison(timings[timings["key"].isin(keys)], paper)


def run_rollouts(
    configs: Sequence[Any],
    store: Any,
    executor: str = "local",
    workers: int = 1,
    address: str | None = None,
    force: bool = False,
    cache: Path | None = None,
    on_done: Callable[[Any, list[dict[str, Any]] | None, BaseException | None], None] | None = None,
) -> list[dict[str, Any]]:
    """Train and store every quantized-rollout run (``methods.rollout.RolloutConfig``) the store lacks (all with
    ``force``), on local processes or a Ray cluster; the stored rows of all of them, in order."""
    from quarl_bench.executors import make_executor, run_all
    from quarl_bench.methods.rollout import RolloutWork, job_for, rollout_remotely, run_rollout_in_worker
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.zoo.agents import DEFAULT_CACHE

    store.check()
    driver = driver_provenance()
    pending = [c for c in configs if force or not store.has(job_for(c).key)]
    works = [RolloutWork(c, cache or DEFAULT_CACHE, driver, force) for c in pending]
    if works:
        # Ray tasks return rows the driver stores, so its force is always on; local workers store their own
        runner = make_executor(
            executor,
            store,
            min(workers, len(works)),
            force or executor == "ray",
            address,
            local_entry=run_rollout_in_worker,
            remote_entry=rollout_remotely,
        )
        run_all(runner, works, on_done)
    rows = [store.get(job_for(c).key) for c in configs]
    return [row for row in rows if row is not None]
