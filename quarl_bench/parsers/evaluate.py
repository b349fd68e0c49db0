"""Commands that quantize an agent and evaluate it: run, sensitivity, mixed, fidelity, sweep."""

from __future__ import annotations

from pathlib import Path

from quarl_bench.certify.config import CertifyConfig
from quarl_bench.methods.fidelity import FidelityConfig
from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import (
    add_agent,
    add_certification,
    add_certify_settings,
    add_env,
    add_evaluation,
    add_executor,
    add_precisions,
    add_recipe,
    add_sources,
    add_spec,
    add_store,
    non_negative_float,
    positive_int,
)
from quarl_bench.parsers.config_flags import config_flag, config_flags


def add_run(commands: Subcommands) -> None:
    run = commands.add_parser("run", help="post-training quantize an agent and evaluate it against fp32")
    run.set_defaults(handler=handler("evaluate:run"))
    add_agent(run)
    add_precisions(run, "precision(s), 32 the unquantized policy", ["int8"])
    add_spec(run)
    add_recipe(run)
    run.add_argument(
        "--random-baseline",
        action="store_true",
        help="also evaluate a uniform-random policy (the 0 of the report's normalised scores)",
    )
    add_evaluation(run, "precision", statistics=True)


def add_certify(commands: Subcommands) -> None:
    certify = commands.add_parser(
        "certify", help="decide which precisions are safe: a sequential paired test per width, widest first"
    )
    certify.set_defaults(handler=handler("evaluate:certify"))
    add_agent(certify, env_required=False)
    certify.add_argument(
        "--grid",
        type=Path,
        default=None,
        metavar="FILE",
        help="certify every agent and spec of a YAML grid (zoo_configs/*.yaml); --algo/--env then filter it",
    )
    add_precisions(
        certify,
        "precisions to certify, walked from the widest down",
        ["fp16", "int8", "int6", "int5", "int4", "int3", "int2"],
    )
    add_spec(certify)
    add_recipe(certify)
    add_executor(certify, "processes certifying agents, families and scale sets side by side", "1, this process")
    names = ("batch", "max_episodes", "planned_episodes", "seed", "n_envs", "every_width")
    config_flags(certify, CertifyConfig, names, linked=("batch", "max_episodes"))
    add_certification(certify)
    certify.add_argument(
        "--against-parent",
        action="store_true",
        help="a hardened agent (quarl-bench harden): compare with its parent's fp32 (and certify its own fp32 too)",
    )
    certify.add_argument(
        "--method",
        default="ptq",
        metavar="NAME",
        help="the method whose evaluator plays each questioned policy: ptq (quantize and play), or any registered "
        "method with an evaluator of its own",
    )
    certify.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    add_store(certify)
    certify.add_argument("--force", action="store_true", help="decide again what the store has verdicts for")


def add_sensitivity(commands: Subcommands) -> None:
    sensitivity = commands.add_parser(
        "sensitivity", help="quantize one acting layer at a time: which layers break a policy"
    )
    sensitivity.set_defaults(handler=handler("evaluate:sensitivity"))
    add_agent(sensitivity)
    add_precisions(sensitivity, "precisions each layer is tried at", ["int8", "int6", "int4", "int2"])
    add_evaluation(sensitivity, "layer and precision", statistics=True)


def add_mixed(commands: Subcommands) -> None:
    mixed = commands.add_parser("mixed", help="search a per-layer bit allocation within a reward tolerance")
    mixed.set_defaults(handler=handler("evaluate:mixed"))
    add_agent(mixed)
    add_precisions(mixed, "candidate precisions per layer", ["fp16", "int8", "int6", "int4", "int2"])
    add_certify_settings(mixed, "each step's certification:", max_episodes=200)  # a step undecided then: rejected
    mixed.add_argument("-n", "--episodes", type=positive_int, default=100, help="episodes per evaluation and seed")
    mixed.add_argument(
        "--n-envs", type=positive_int, default=None, help="envs evaluated at once (default per env kind)"
    )
    mixed.add_argument("--search-seeds", type=int, nargs="+", default=[0], help="seeds the search evaluates on")
    mixed.add_argument(
        "--verify-seeds",
        type=int,
        nargs="+",
        default=[100, 101, 102],
        help="fresh seeds the found allocation is verified on (default 100 101 102)",
    )
    mixed.add_argument("--seed", type=int, default=0, help="training seed if --train-if-missing trains the agent")
    add_store(mixed)


def add_fidelity(commands: Subcommands) -> None:
    fidelity = commands.add_parser("fidelity", help="fp32 and quantized policies side by side: where trajectories part")
    fidelity.set_defaults(handler=handler("evaluate:fidelity"))
    add_agent(fidelity)
    add_precisions(
        fidelity, "precisions compared with fp32 (32: fp32 against itself)", ["fp16", "int8", "int4", "int2"]
    )
    add_spec(fidelity)
    add_recipe(fidelity)
    config_flag(fidelity, FidelityConfig, "threshold", alone=False)
    fidelity.add_argument("-n", "--episodes", type=positive_int, default=20, help="episodes (one per env, default 20)")
    fidelity.add_argument("--seed", type=int, default=0, help="env i gets seed + i in both runs")
    fidelity.add_argument(
        "--obs-noise",
        type=non_negative_float,
        default=0.0,
        metavar="SIGMA",
        help="the same Gaussian noise draws on both runs' observations (default %(default)s)",
    )
    add_store(fidelity)
    fidelity.add_argument("--force", action="store_true", help="measure again what the store has")


def add_sweep(commands: Subcommands) -> None:
    sweep = commands.add_parser("sweep", help="run a YAML job grid (zoo_configs/*.yaml), resuming where it stopped")
    sweep.set_defaults(handler=handler("sweep:sweep"))
    sweep.add_argument("grid", type=Path, help="grid file, e.g. zoo_configs/sweetspot.yaml")
    sweep.add_argument("--algo", nargs="+", type=str.lower, default=None, help="only these algos")
    add_env(sweep, nargs="+", help="only these envs (ids or aliases)")
    add_precisions(sweep, "only these precisions of the grid")
    sweep.add_argument("-n", "--episodes", type=positive_int, default=None, help="override the grid's episodes")
    sweep.add_argument(
        "--eval-seeds",
        type=int,
        nargs="+",
        default=None,
        metavar="S",
        help="evaluation seeds for every PTQ cell (override the grid's seeds; paired like run's)",
    )
    sweep.add_argument(
        "--random-baseline",
        action="store_true",
        help="also evaluate the uniform-random policy once per agent and seed (the 0 of the "
        "report's normalised-score aggregates)",
    )
    add_sources(sweep)
    sweep.add_argument("--hub", action="store_true", help="also try the Hugging Face hub for missing agents")
    add_executor(sweep, "processes")
    add_store(sweep)
    sweep.add_argument("--force", action="store_true", help="re-run jobs already in the store")
