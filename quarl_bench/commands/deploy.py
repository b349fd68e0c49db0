"""Commands that build artifacts: deploy, export and table4."""

from __future__ import annotations

import argparse
from pathlib import Path

from quarl_bench.commands.common import _agent_for, once_per_row
from quarl_bench.extras import require
from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore
from quarl_bench.store.agent_names import ref_title


def deploy_targets(args: argparse.Namespace, backends: list[str]) -> tuple:
    """The artifacts the flags ask for: one per backend, with ``--calibration-states/-method`` where it calibrates."""
    from quarl_bench.deploy.targets import deploy_target

    return tuple(
        deploy_target(name, args.calibration_states, args.calibration_method) for name in dict.fromkeys(backends)
    )


def check_c_prefix(prefix: str, backend: str) -> None:
    """``--c-prefix`` names C symbols: a C identifier, for a C backend only.

    :raises QuarlError: in one line, naming the bad value and what is accepted.
    """
    from quarl_bench.deploy.c_source import CNames
    from quarl_bench.deploy.targets import BACKENDS
    from quarl_bench.errors import QuarlError

    if prefix and BACKENDS.get(backend).kind != "c":
        raise QuarlError(f"bad --c-prefix for backend {backend}: it names C symbols, expected a c-* backend")
    CNames(prefix)


def deploy(args: argparse.Namespace) -> int:
    require("deploy", "deploy", ("onnx", "onnxruntime"))
    from quarl_bench.api import run_deploy
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.report.console import result_line
    from quarl_bench.report.console_deployment import deployment_console_table

    targets = deploy_targets(args, args.backend)
    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        rows = run_deploy(
            ref,
            targets,
            EvalSettings(args.episodes, args.seed, args.n_envs),
            store,
            args.force,
            on_result=once_per_row(lambda row, reused: console.print(result_line(row, reused))),
            on_error=lambda backend, reason: console.print(f"[yellow]{backend} cannot run here[/]: {reason}"),
        )
        console.print(deployment_console_table(rows, f"{ref_title(ref)}: deployed artifacts"))
        console.print(f"Stored in {store.path}")
    return 0


def table4(args: argparse.Namespace) -> int:
    require("deploy", "table4", ("onnx", "onnxruntime"))
    from quarl_bench.api import time_table4
    from quarl_bench.deploy.synthetic import machine
    from quarl_bench.report.console_deployment import table4_table

    console.print(f"Timing QuaRL Table 4 policies {', '.join(args.policy)} on {machine()} (one thread, batch 1)")
    with ResultStore(args.store or DEFAULT_STORE) as store:
        comparison = time_table4(
            args.policy,
            args.backend,
            args.calls,
            store,
            args.force,
            on_error=lambda policy, backend, why: console.print(
                f"[yellow]policy {policy}: {backend} cannot run here[/]: {why}"
            ),
        )
    console.print(table4_table(comparison))
    console.print(f"Stored in {store.path}; `quarl-bench report` writes table4.md next to the paper's figures")
    return 0


def export(args: argparse.Namespace) -> int:
    from quarl_bench.api import export_artifact
    from quarl_bench.api.deploy import check_out
    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.deploy.backends import require_backend
    from quarl_bench.parsers.config_flags import config_from_args

    target = deploy_targets(args, [args.backend])[0]
    out = Path(args.out)
    check_out(out, args.force)  # before loading anything: a bad --out or a missing runtime fails at once
    require_backend(target.backend)
    check_c_prefix(args.c_prefix, target.backend)
    config = config_from_args(CertifyConfig, args)  # its fields: tolerance, guarantee, max episodes, seed
    with ResultStore(args.store or DEFAULT_STORE) as store:
        ref = _agent_for(args, store)
        done = export_artifact(
            ref,
            target,
            out,
            store,
            args.force,
            args.allow_divergent,
            config,
            on_step=lambda text: console.print(text),
            allow_degraded=args.allow_degraded,
            c_prefix=args.c_prefix,
        )
    document = done.contract
    certification = document["certification"]
    for condition in certification["conditions"]:
        under = "" if condition["condition"] == "nominal" else f" under {condition['condition']}"
        for name, reference in (("against_claimed", done.claimed), ("against_fp32", "fp32")):
            found = condition[name]
            what = "" if certification["outcome"] == "return" else f", {certification['outcome']}"
            console.print(
                f"closed loop against {reference}{under}: {found['verdict']} after {found['episodes']} paired episodes "
                f"(δ = {found['delta']:.3g}, {found['guarantee']}{what}; artifact {found['artifact_return']['mean']:.2f}, "
                f"{reference} {found['reference_return']['mean']:.2f})"
            )
    console.print(f"verdicts stored in {certification['store']}")
    if "cortex_m4" in document:
        from quarl_bench.deploy.contract import cortex_m4_text

        console.print(cortex_m4_text(document["cortex_m4"]))
    names = ", ".join(document["files"])
    console.print(f"wrote {out}/ ({names}, policy.json, README.md; sha256 {done.artifact.sha256[:16]})")
    return 0


def verify(args: argparse.Namespace) -> int:
    from quarl_bench.deploy.check import run_check

    passed, lines = run_check(Path(args.folder), args.emulate)
    for line in lines:
        console.print(line, highlight=False)
    return 0 if passed else 1
