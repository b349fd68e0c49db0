"""The ``harden`` command: one agent from the flags, or the study of ``--grid``."""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape

from quarl_bench.commands.common import _agent_for
from quarl_bench.errors import QuarlError
from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore
from quarl_bench.store.agent_names import ref_title


def parse_settings(items: list[str] | None) -> dict[str, dict[str, Any]]:
    """``distill.margin=0.2`` ... as ``{"distill": {"margin": 0.2}}`` (values read as YAML scalars).

    :raises QuarlError: for an item not of the form PART.NAME=VALUE.
    """
    import yaml

    settings: dict[str, dict[str, Any]] = {}
    for item in items or []:
        name, equals, value = item.partition("=")
        part, dot, field = name.partition(".")
        if not (equals and dot and part and field):
            raise QuarlError(f"bad --setting {item!r}: expected PART.NAME=VALUE, e.g. distill.margin=0.2")
        settings.setdefault(part, {})[field] = yaml.safe_load(value)
    return settings


def target_spec(args: argparse.Namespace):
    from quarl_bench.parsers.arguments import spec_from_args

    if getattr(args, "for_backend", None):
        from quarl_bench.api.harden import backend_target

        return backend_target(args.for_backend, given_spec_flags(args))
    if args.bits is None:
        raise QuarlError("harden needs --bits P (the target precision, e.g. 4), --for BACKEND or --grid FILE")
    return spec_from_args(args, args.bits)


def given_spec_flags(args: argparse.Namespace) -> dict[str, object]:
    """The spec flags given on the command line (their defaults left out): ``--for`` refuses any its claim denies."""
    given = {
        "precision": args.bits,
        "granularity": None if args.granularity == "auto" else args.granularity,
        "symmetric": True if args.symmetric else None,
        "quantize_bias": True if args.quantize_bias else None,
        "act_bits": args.act_bits,
        "obs_bits": args.obs_bits,
        "out_bits": args.out_bits,
    }
    return {name: value for name, value in given.items() if value is not None}


def certify_config(args: argparse.Namespace, base: Any = None):
    from dataclasses import replace

    from quarl_bench.certify.config import CertifyConfig

    config = base or CertifyConfig(args.tolerance, confidence=args.confidence)
    return replace(config, max_episodes=args.max_episodes) if args.max_episodes else config


def harden(args: argparse.Namespace) -> int:
    if args.grid:
        return study(args)
    from quarl_bench.api.harden import certified_specs, certify_hardening, harden_agent, hardened_ref
    from quarl_bench.report.console_harden import hardened_lines, study_table

    spec = target_spec(args)
    settings = parse_settings(args.setting)
    recipes = args.recipe or ["distill"]
    if len(recipes) > 1:
        raise QuarlError(f"bad --recipe {' '.join(recipes)}: expected one recipe for one agent (several with --grid)")
    if not args.env:
        raise QuarlError("harden needs --env (one agent) or --grid FILE (the study)")
    from quarl_bench.training.harden.recipes import parse_recipe

    parse_recipe(recipes[0])  # bad values fail here, before the agent loads
    checked = certify_config(args)  # --confidence, --tolerance, --max-episodes
    config = checked if args.certify else None
    with ResultStore(args.store or DEFAULT_STORE) as store:
        parent = _agent_for(args, store)
        console.print(f"Hardening with {recipes[0]} for {spec.precision} ...")
        row = harden_agent(
            parent, spec, recipes[0], store, args.budget, args.out, args.seed, args.force, settings, args.cache
        )
        for line in hardened_lines(row):
            console.print(line)
        worse = False
        if config is not None:
            child = hardened_ref(row, parent)
            verdicts = certify_hardening(parent, child, certified_specs(spec), config, store, _show_verdict)
            console.print(study_table(_frame(store, [row["key"]])))
            worse = any(v.spec == "fp32" and v.verdict == "unsafe" for v in verdicts.after.verdicts)
            if worse:
                console.print(
                    "[red]The hardened agent's fp32 policy is certified worse than its parent's: keep the parent, "
                    "or try another recipe or setting (exit code 1)[/]"
                )
        console.print(f"Stored in {store.path}")
    return 1 if worse else 0


def _frame(store: ResultStore, keys: list[str]):
    """The report's hardened-agents lines of these hardenings."""
    from quarl_bench.report.hardened import hardening_frame

    hardened = store.hardened()
    return hardening_frame(hardened[hardened["key"].isin(keys)], store.verdicts(), store.agent_names())


def _show_verdict(which: str, found: Any) -> None:
    from quarl_bench.report.console import verdict_line

    console.print(f"  {which}: {verdict_line(found)}")


def study(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from quarl_bench.api import agent_sources
    from quarl_bench.api.harden import load_harden_study, run_harden_study
    from quarl_bench.report.console_harden import study_table

    plan = load_harden_study(args.grid)
    plan = replace(plan, certify=certify_config(args, plan.certify))
    given = [flag for flag, value in (("--bits", args.bits), ("--budget", args.budget)) if value]
    if given:
        console.print(f"[yellow]{' and '.join(given)} ignored: the study {args.grid} sets the target and budget[/]")
    sources = agent_sources(args.folder, args.cache, not args.no_hub, args.train_if_missing, args.trust_remote_code)
    algos = [args.algo] if args.algo else None
    envs = [args.env] if args.env else None

    def starting(parent, recipe: str) -> None:
        console.print(f"[bold]{escape(ref_title(parent))}[/]: {recipe} ...")

    with ResultStore(args.store or DEFAULT_STORE) as store:
        lines = run_harden_study(plan, sources, store, algos, envs, args.recipe, starting)
        console.print(study_table(_frame(store, [line.row["key"] for line in lines])))
        console.print(f"Stored in {store.path}; `quarl-bench report` adds the hardened agents' section")
    return 0
