"""Real artifacts: deploy (play, time, weigh), export, and QuaRL Table 4's timings."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from quarl_bench.api.c_firmware import c_firmware
from quarl_bench.deploy.contract import contract, readme
from quarl_bench.deploy.parity import (
    artifact_parity,
    claimed_spec,
    degraded_cause,
    divergence_cause,
    failing_rows,
)
from quarl_bench.errors import QuarlError
from quarl_bench.types import AgentRef, DeployTarget, QuantSpec

if TYPE_CHECKING:
    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.store import ResultStore


def run_deploy(
    ref: AgentRef,
    targets: tuple[DeployTarget, ...],
    settings: EvalSettings,
    store: ResultStore,
    force: bool = False,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
    on_error: Callable[[str, str], None] | None = None,
) -> list[dict[str, Any]]:
    """Build, play, time and weigh each deployment backend's artifact (torch-fp32, the reference, always); a
    backend that cannot run here is reported through ``on_error(backend, reason)`` and the others still run."""
    from quarl_bench.jobs.work import Work
    from quarl_bench.methods.deploy import DeployConfig
    from quarl_bench.run.runner import run_work
    from quarl_bench.store.provenance import driver_provenance

    store.check()
    driver = driver_provenance()
    rows: dict[str, dict[str, Any]] = {}
    for target in targets:
        work = Work(DeployConfig(ref, (target,)), settings, driver=driver)
        try:
            for row in run_work(work, store, force, on_result):
                rows[row["key"]] = row
        except Exception as error:  # noqa: BLE001 - ONNX Runtime, torchao and onnx raise many types
            text = str(error).strip()
            if on_error:
                on_error(target.backend, f"{type(error).__name__}: {text.splitlines()[0] if text else ''}")
    return list(rows.values())


@dataclass(frozen=True)
class Export:
    """What ``export`` wrote (or refused to write): the artifact, its folder and its contract."""

    artifact: Any
    folder: Path
    contract: dict[str, Any]
    claimed: str = ""  # the fake-quant spec it claims to be, in words


def _refuse_masked(agent: Any, backend: str) -> None:
    """:raises QuarlError: for an agent whose env masks actions: an artifact takes no mask input (yet), so it would
    play actions the env forbids."""
    from quarl_bench.evaluation.masks import MASK_METHOD, mask_reader

    env = agent.make_env(1, 0)
    try:
        masked = mask_reader(env) is not None
    finally:
        env.close()
    if masked:
        raise QuarlError(
            f"{agent.ref.algo}/{agent.ref.env_id}'s env masks actions ({MASK_METHOD}()), and a {backend} artifact "
            "takes no mask input: it would play actions the env forbids; nothing written (expected an env without "
            "action masks)"
        )


def export_artifact(
    ref: AgentRef,
    target: DeployTarget | str,
    out: Path,
    store: ResultStore,
    force: bool = False,
    allow_divergent: bool = False,
    certify: CertifyConfig | None = None,
    on_step: Callable[[str], None] | None = None,
    allow_degraded: bool = False,
    c_prefix: str = "",
) -> Export:
    """Build ``target``'s artifact of the agent, gate it on parity with the fake-quant policy it claims to be,
    certify its closed-loop reward against that policy and against fp32 (the verdicts go to ``store``), and write
    the folder ``out``: the artifact's files, ``policy.json`` and ``README.md``, whole or not at all.

    :param target: a backend's name (``"c-int8"``), or :func:`~quarl_bench.deploy.targets.deploy_target`'s value
        for a backend that calibrates.
    :param certify: a :class:`~quarl_bench.certify.plan.CertifyConfig` (default: 20-episode batches, at most
        :data:`~quarl_bench.certify.config.EXPORT_MAX_EPISODES`).
    :param c_prefix: a C artifact's symbol prefix (``NAME_act``, ``NAME_*`` macros); '' keeps ``quarl_policy_act``.
    :raises QuarlError: for an unwritable or non-empty ``out`` (without ``force``), a missing runtime, a policy the
        backend cannot express, a parity gate failed without ``allow_divergent``, or an artifact certified worse
        than fp32 by more than δ without ``allow_degraded`` (nothing is written then).
    """
    from quarl_bench.deploy.backends import require_backend
    from quarl_bench.deploy.contract import parity_text
    from quarl_bench.deploy.targets import check_target, deploy_target

    step = on_step or (lambda text: None)
    check_out(out, force)
    export_conditions(certify, ref.env_id)  # a bad condition: one line, before anything is built
    target = deploy_target(target) if isinstance(target, str) else check_target(target)
    require_backend(target.backend)
    agent, module = _deployable(ref)
    _refuse_masked(agent, target.backend)
    artifact, _ = _built(agent, target)
    if not artifact.standalone:
        raise QuarlError(
            f"backend {target.backend} has no standalone artifact format: expected an ort-*, litert-*, executorch-*, "
            "c-int8 or torch-fp32 backend"
        )
    # an artifact's identity is its bytes: the certificate is measured on these bytes, and a stored closed-loop
    # verdict is reused only for the same ones (a build that gave other bytes is measured again)
    target = replace(target, artifact=artifact.sha256)
    claimed = claimed_spec(target.backend, module.image)
    claimed = getattr(module, "claim", lambda _backend, spec: spec)(target.backend, claimed)  # a chunk loop's own
    _check_claim_simulable(module, target, claimed)
    size = "C source; flash below" if artifact.kind == "c" else f"{artifact.nbytes} bytes"
    step(f"built {target.backend} ({size}); parity against {spec_text(claimed)} on fixed states")
    detail: dict[str, Any] = {}
    parity = artifact_parity(agent, module, artifact, claimed, claimed_policy(agent, claimed), detail)
    step(parity_text(parity))
    certification = certify_artifact(ref, target, claimed, store, certify, step)
    if not parity["passed"] and not allow_divergent:
        raise QuarlError(
            f"parity gate failed for {target.backend}: {parity_text(parity)} (limit: {parity['limit']}); "
            f"{failing_rows(parity, feature_names(module), detail.get('raw_states'))}"
            f"{divergence_cause(artifact, claimed, parity)}nothing written, pass --allow-divergent to write it anyway"
        )
    worse = [c for c in certification["conditions"] if c["against_fp32"]["verdict"] == "unsafe"]
    if worse and not allow_degraded:
        fp32, under = worse[0]["against_fp32"], worse[0]["condition"]
        raise QuarlError(
            f"the {target.backend} artifact is certified worse than fp32 by more than δ = {fp32['delta']:.3g}"
            + (f" under {under}" if under != "nominal" else "")
            + f": mean {certification['outcome']} {fp32['artifact_return']['mean']:.2f} against fp32 "
            f"{fp32['reference_return']['mean']:.2f} over {fp32['episodes']} paired episodes; "
            f"{degraded_cause(target.backend, certification, spec_text(claimed))}"
            "nothing written, pass --allow-degraded to write it anyway"
        )
    firmware = c_firmware(agent, module, artifact, c_prefix) if artifact.kind == "c" else None
    if firmware is not None:
        artifact = firmware.artifact
    cortex_m4 = firmware.cortex_m4 if firmware is not None else None
    document = contract(
        artifact, ref, module, target, claimed, parity, allow_divergent, certification, cortex_m4, spec_text(claimed)
    )
    if firmware is not None:
        document["c"] = firmware.contract
        document["files"] |= {name: hashlib.sha256(data).hexdigest() for name, data in firmware.files.items()}
    from quarl_bench.deploy.check import travelling_gate

    checked = travelling_gate(artifact, module, detail, document)
    files = (
        artifact.named_files()
        | (firmware.files if firmware is not None else {})
        | checked
        | {
            "policy.json": (json.dumps(document, indent=2) + "\n").encode(),
            "README.md": readme(artifact, ref, document).encode(),
        }
    )
    write_folder(out, files, force)
    return Export(artifact, out, document, spec_text(claimed))


def check_out(out: Path, force: bool) -> None:
    """``out`` must be a new folder, an empty one, or (with ``force``) one to replace, in a writable parent.

    :raises QuarlError: in one line, naming the path and what is accepted.
    """
    if out.exists() and not out.is_dir():
        raise QuarlError(f"cannot write {str(out)!r}: it is a file; expected a folder path for the artifact")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise QuarlError(f"{str(out)!r} exists and is not empty: expected a new or empty folder, or pass --force")
    parent = out.resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise QuarlError(f"cannot write {str(out)!r}: expected a folder path in an existing, writable folder")


def write_folder(out: Path, files: dict[str, bytes], force: bool) -> None:
    """Write ``files`` into a sibling temporary folder, then rename it to ``out`` (replacing it with ``force``)."""
    import shutil
    import tempfile

    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.resolve().parent))
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes 0700: the folder gets what the user's umask gives
        for name, data in files.items():
            (staging / name).write_bytes(data)
        if out.is_dir():
            if any(out.iterdir()) and not force:
                raise QuarlError(f"{str(out)!r} appeared while writing: expected a new folder")
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _deployable(ref: AgentRef) -> tuple[Any, Any]:
    from quarl_bench.deploy.export import deployable, split_normalizer
    from quarl_bench.zoo.forms import load_agent

    agent = load_agent(ref)
    env = agent.make_env(1, 0)
    try:
        raw, normalizer = split_normalizer(env)
        module = deployable(agent.model.policy, raw.observation_space, normalizer)
    finally:
        env.close()
    return agent, module


def _built(agent: Any, target: DeployTarget) -> tuple[Any, float]:
    from quarl_bench.methods.deploy import (
        CALIBRATION_SEED_OFFSET,
        built_artifact,
        deploy_calibration_states,
        target_calibration,
    )

    sample = deploy_calibration_states(agent, 1, CALIBRATION_SEED_OFFSET)
    return built_artifact(agent, target, sample, target_calibration(agent, target))


def claimed_policy(agent: Any, claimed: QuantSpec) -> Any:
    """The fake-quant policy an artifact claims to be: the agent's fp32 policy, or PTQ's quantized copy of it."""
    from quarl_bench.methods.ptq import quantized

    return agent.model.policy if claimed.is_identity else quantized(agent, claimed)[0]


def certify_artifact(
    ref: AgentRef,
    target: DeployTarget,
    claimed: QuantSpec,
    store: ResultStore,
    config: Any,
    step: Callable[[str], None],
) -> dict[str, Any]:
    """The artifact's closed loop (``target``, method deploy) on paired episodes, certified twice with the certify
    command's sequential test and driver: not worse than the **fp32** policy by more than δ (does the deployed
    policy still work?), then equivalent to the fake-quant policy ``claimed`` (within ±δ; fp32's batches, stored
    by then, also tighten δ's bounds). Both verdicts are stored (reused when stored); each carries both policies'
    means of the certified outcome with their confidence bounds. Under a suite (``config.perturb``, a severity grid)
    both are certified under each condition, α shared family-wise; the first condition's verdicts lead."""
    from quarl_bench.certify.config import EXPORT_MAX_EPISODES, CertifyConfig
    from quarl_bench.certify.driver import certify_all
    from quarl_bench.certify.plan import FP32, CertifyRequest, Ladder, Question
    from quarl_bench.report.verdicts import outcome_of
    from quarl_bench.run.executors import make_executor
    from quarl_bench.store.provenance import driver_provenance

    config = config or CertifyConfig(max_episodes=EXPORT_MAX_EPISODES)
    store.check()
    grid = export_conditions(config, ref.env_id)
    questions = (
        Question(target.spec, FP32, equivalence=False, test="non-inferiority", target=target),
        Question(target.spec, claimed, equivalence=True, test="equivalence", target=target),
    )
    requests = [
        CertifyRequest(ref, (Ladder(questions, stops=False),), replace(config, perturb=condition), families=len(grid))
        for condition in grid
    ]

    def decided(number: int, found: Any) -> None:
        question = questions[found.question]
        verb = "found stored" if found.reused else "certified"
        under = f" under {grid[number]}" if grid[number] else ""
        step(
            f"{verb}{under}: {found.row['verdict']} against {spec_text(question.reference)} ({question.test}, "
            f"δ = {found.row['delta']:.3g}, {found.row['episodes']} paired episodes)"
        )

    what = outcome_of(dataclasses.asdict(config))
    step(f"certifying the closed-loop {what} against {spec_text(FP32)} and {spec_text(claimed)}")
    executor = make_executor("local", store, 1)
    conditions: list[dict[str, Any]] = []
    for condition, outcome in zip(
        grid, certify_all(requests, store, executor, driver_provenance(), on_verdict=decided), strict=True
    ):
        against_fp32, against_claimed = (
            _closed_loop(found.row, questions[found.question], store, outcome.certifier)
            for found in outcome.verdict_rows()
        )
        conditions.append(
            {"condition": condition or "nominal", "against_fp32": against_fp32, "against_claimed": against_claimed}
        )
    return {
        "artifact_sha256": target.artifact,  # the bytes every closed-loop episode below was played on
        "guarantee": conditions[0]["against_fp32"]["guarantee"],
        "outcome": what,
        "suite": config.perturb or "nominal",
        "against_claimed": conditions[0]["against_claimed"],
        "against_fp32": conditions[0]["against_fp32"],
        "conditions": conditions,
        "store": str(store.path),
    }


def export_conditions(config: Any, env_id: str) -> list[str]:
    """The conditions an export certifies its artifact under: each of ``config.perturb``'s severity grid, in its
    canonical spelling ('' for the nominal simulator).

    :raises QuarlError: in one line, for a condition the env cannot play under (before anything is built).
    """
    from quarl_bench.evaluation.perturbations import condition_for, condition_grid

    return [condition_for(condition, env_id) for condition in condition_grid(config.perturb if config else "")]


def _closed_loop(stored: dict[str, Any], question: Any, store: ResultStore, certifier: Any) -> dict[str, Any]:
    """One stored verdict of an artifact, with both arms' means of the certified outcome and their bounds."""
    evidence = stored.get("evidence") or {}
    alpha = evidence.get("alpha_test", stored["alpha"])
    returns = _arm_means(store, stored["rows"], certifier, alpha)
    return {
        "verdict": stored["verdict"],
        "test": (
            "equivalence: the mean paired difference (artifact - fake-quant) within ±δ"
            if question.equivalence
            else "non-inferiority: the mean paired difference (artifact - fp32) above -δ"
        ),
        "guarantee": evidence.get("guarantee", "asymptotic"),
        "return_bounds": evidence.get("bounds"),
        "episodes": stored["episodes"],
        "mean_difference": stored["mean"],
        "lower": stored["lower"],
        "upper": stored["upper"],
        "delta": stored["delta"],
        "delta_low": evidence.get("delta_low"),
        "tolerance": stored["tolerance"],
        "confidence": 1 - stored["alpha"],
        "catastrophe_rate_upper": evidence.get("catastrophe_rate_upper"),
        "artifact_return": returns[0],
        "reference_return": returns[1],
        "verdict_key": stored["key"],
        "rows": stored["rows"],
    }


def _arm_means(store: ResultStore, keys: list[str], certifier: Any, alpha: float) -> tuple[dict, dict]:
    """Each arm's mean of the certified outcome (the return by default) over the verdict's batches (keys alternate
    artifact, reference) with the test's confidence bounds on it."""
    arms: tuple[list[float], list[float]] = ([], [])
    for number, key in enumerate(keys):
        arms[number % 2].extend(certifier.values(store.stored(key)))
    summaries = []
    for values in arms:
        interval = certifier.test(alpha).mean_interval(np.asarray(values, dtype=float))
        summaries.append({"mean": interval.mean, "lower": interval.lower, "upper": interval.upper})
    return summaries[0], summaries[1]


def feature_names(module: Any) -> list[str]:
    """The artifact's input columns by name (a Dict's ``key[i]``; else ``obs[i]``)."""
    layout = getattr(module, "layout", None)
    return layout.features() if layout is not None else []


def spec_text(spec: QuantSpec) -> str:
    from quarl_bench.certify.plan import spec_name

    return "fp32 torch" if spec.is_identity else f"fake-quant {spec_name(spec)}"


def _check_claim_simulable(module: Any, target: DeployTarget, claimed: QuantSpec) -> None:
    """An ONNX policy that is no MLP chain runs its own graph: quarl-bench simulates weight quantization on it, not
    activations, so a backend that claims quantized activations (the W8A8 fake-quant) has nothing to be gated
    against.

    :raises QuarlError: in one line, naming the backends an ONNX policy exports to.
    """
    from quarl_bench.deploy.targets import onnx_capable

    if module.torch_layers or not claimed.activations:
        return
    takes = onnx_capable()
    raise QuarlError(
        f"backend {target.backend} claims {spec_text(claimed)}, whose activation quantization is simulated on torch "
        f"layers only, and this ONNX policy is played as its own graph ({module.policy.not_a_chain}): such a graph "
        f"exports to {', '.join(takes)}"
    )
