"""The ``harden`` command: fine-tune an agent so that it survives a narrow spec."""

from __future__ import annotations

from pathlib import Path

from quarl_bench.methods.harden import HardenConfig
from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import (
    add_agent,
    add_certify_settings,
    add_precisions,
    add_recipe,
    add_spec,
    add_store,
)
from quarl_bench.parsers.config_flags import config_flag

RECIPE_NAMES = ("distill", "sam", "noise", "distill+noise", "distill+sam", "sam+noise", "distill+sam+noise")


def add_harden(commands: Subcommands) -> None:
    harden = commands.add_parser(
        "harden",
        help="fine-tune an agent (distill, sam, noise, ...) so that it survives a narrow spec; writes a normal agent",
        description="One agent from the flags (zoo, --model or --policy-module), or every agent x recipe of --grid. "
        "Writes OUT.zip (OUT.onnx for a torch module) with OUT/ beside it (the parent's normalisation and "
        "harden.json, its provenance). --certify then certifies the parent and the hardened agent, both against "
        "the parent's fp32.",
    )
    harden.set_defaults(handler=handler("harden:harden"))
    add_agent(harden, env_required=False)
    harden.add_argument(
        "--grid", type=Path, default=None, metavar="FILE", help="the study file, e.g. zoo_configs/harden.yaml"
    )
    harden.add_argument(
        "--recipe",
        nargs="+",
        default=None,
        metavar="R",
        help=f"one of {', '.join(RECIPE_NAMES)} (default distill; with --grid: only these)",
    )
    harden.add_argument(
        "--setting",
        nargs="+",
        default=None,
        metavar="PART.NAME=VALUE",
        help="a recipe setting, e.g. distill.margin=0.2 sam.rho=0.1 (see docs/hardening.md)",
    )
    add_precisions(harden, "the target precision", many=False)
    harden.add_argument(
        "--for",
        dest="for_backend",
        default=None,
        metavar="B",
        help="aim at backend B's claim (its precision, granularity, symmetry and activation bits), the spec "
        "`export --backend B` gates and certifies against, e.g. c-int4; conflicting spec flags are refused",
    )
    add_spec(harden)
    add_recipe(harden)
    harden.add_argument(
        "--budget",
        type=int,
        default=None,
        metavar="STEPS",
        help="env steps (RL loss: training steps; distill: states collected); default a tenth of the zoo's steps",
    )
    config_flag(harden, HardenConfig, "seed", alone=False)
    harden.add_argument(
        "--out", type=Path, default=None, help="OUT.zip (OUT.onnx for a torch module); default the cache"
    )
    harden.add_argument(
        "--force", action="store_true", help="replace an existing --out (and re-run a stored hardening)"
    )
    harden.add_argument(
        "--certify", action="store_true", help="certify the parent and the hardened agent against the parent's fp32"
    )
    add_certify_settings(harden, "certify's")
    add_store(harden)
