"""Shared pieces of the command line: flag value types (one clear line for a bad value) and the flag groups
several commands take. argparse only: no torch, gymnasium or Ray."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from quarl_bench import perturbations
from quarl_bench.errors import QuarlError
from quarl_bench.precision import help_text, parse_precision
from quarl_bench.rounding import ROUNDINGS
from quarl_bench.types import (
    ACT_CALIBRATION_METHODS,
    CALIBRATION_METHODS,
    DEFAULT_CALIBRATION_STATES,
    GRANULARITIES,
    GROUP_SIZES,
    LAYER_MODES,
    PRUNE_STRUCTURES,
    QuantSpec,
)
from quarl_bench.zoo.algorithms import ALGOS


def precision_arg(value: str) -> str:
    try:
        return parse_precision(value)
    except QuarlError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def add_precisions(
    parser: argparse.ArgumentParser, purpose: str, default: list[str] | None = None, many: bool = True, **kwargs
) -> None:
    """``--bits``, one way for every command: its precisions' names (:func:`~quarl_bench.precision.help_text`) and
    its default written once, in ``default`` (the help shows it as ``fp16 8 6 4 2``)."""
    shown = f" (default {' '.join(p.removeprefix('int') for p in default)})" if default else ""
    parser.add_argument(
        "--bits",
        nargs="+" if many else None,
        type=precision_arg,
        default=default,
        metavar="P",
        help=f"{purpose}: {help_text()}{shown}",
        **kwargs,
    )


def named_precision(name: str):
    """A flag type for an activation-like precision: the bad value and the flag's name in one line."""

    def parse(value: str) -> str:
        try:
            return parse_precision(value)
        except QuarlError:
            raise argparse.ArgumentTypeError(f"bad {name} {value!r}: expected {help_text()}") from None

    return parse


def group_size(value: str) -> int:
    if not value.isdigit() or int(value) not in GROUP_SIZES:
        raise argparse.ArgumentTypeError(
            f"bad group size {value!r}: expected one of {', '.join(map(str, GROUP_SIZES))}"
        )
    return int(value)


def _number(value: str) -> float:
    """``value`` as a float; NaN (which every range check refuses) when it is not a number."""
    try:
        return float(value)
    except ValueError:
        return float("nan")


def prune_share(value: str) -> float:
    share = _number(value)
    if not 0 < share < 1:
        raise argparse.ArgumentTypeError(f"bad prune share {value!r}: expected a share of the weights in (0, 1)")
    return share


def positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"bad value {value!r}: expected a positive integer")
    return int(value)


def non_negative_float(value: str) -> float:
    number = _number(value)
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"bad value {value!r}: expected a number >= 0")
    return number


def widths(value: str) -> tuple[int, ...]:
    """Hidden layer widths from ``2048,2048``."""
    parts = value.split(",")
    if not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"bad widths {value!r}: expected comma-separated positive integers (256,256)")
    return tuple(int(part) for part in parts)


def add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", type=Path, default=None, help="results database (default results/quarl.sqlite)")


def add_algo(parser: argparse.ArgumentParser, **kwargs) -> None:
    kwargs.setdefault("help", f"one of {', '.join(ALGOS)}")
    parser.add_argument("--algo", type=str.lower, choices=ALGOS, metavar="ALGO", **kwargs)


ENV_HELP = "env id or alias (CartPole, Breakout, my_pkg:MyEnv-v0, ...)"


def add_env(parser: argparse.ArgumentParser, required: bool = False, default: str | None = None, **kwargs) -> None:
    """``--env``, as every command takes it (one id or alias; ``nargs="+"`` where a command filters by several)."""
    shown = " (default %(default)s)" if default else ""
    kwargs.setdefault("help", ENV_HELP + shown)
    parser.add_argument("--env", required=required, default=default, **kwargs)


def add_cache(parser: argparse.ArgumentParser, what: str = "agent cache") -> None:
    """``--cache``: where found and trained agents are kept."""
    parser.add_argument("--cache", type=Path, default=None, help=f"{what} (default results/agents)")


def add_sources(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--folder", type=Path, default=None, help="rl-zoo3 log folder to take agents from ($QUARL_ZOO)"
    )
    add_cache(parser)
    parser.add_argument("--train-if-missing", action="store_true", help="train missing fp32 baselines with rl-zoo3")
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow hub agents: they are pickles, and loading one runs its author's code",
    )


def env_kwarg(value: str) -> tuple[str, object]:
    """rl-zoo3's ``key:value`` (the value a Python literal, else a string)."""
    import ast

    key, colon, text = value.partition(":")
    if not colon or not key:
        raise argparse.ArgumentTypeError(f"bad env kwarg {value!r}: expected key:value (rl-zoo3's syntax)")
    try:
        return key, ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return key, text


def add_agent(parser: argparse.ArgumentParser, hub: bool = True, env_required: bool = True) -> None:
    """--algo, --env and where the agent may come from, for a command about one agent: the zoo (``--algo``), a
    policy file (``--model``) or a torch module (``--policy-module``)."""
    add_algo(
        parser, help=f"one of {', '.join(ALGOS)}; required without --model/--policy-module (a zip's is read from it)"
    )
    add_env(parser, required=env_required)
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        metavar="FILE",
        help="your own SB3/sb3-contrib .zip or an fp32 .onnx policy (no zoo folder needed)",
    )
    parser.add_argument(
        "--policy-module",
        default=None,
        metavar="FILE.py:FUNCTION",
        help="a function returning a torch.nn.Module: observations -> logits or actions",
    )
    parser.add_argument(
        "--vecnormalize",
        type=Path,
        default=None,
        metavar="PKL",
        help="VecNormalize statistics the --model was trained with",
    )
    parser.add_argument(
        "--env-kwargs",
        type=env_kwarg,
        nargs="+",
        default=None,
        metavar="KEY:VALUE",
        help="keyword arguments for the env (rl-zoo3's syntax)",
    )
    parser.add_argument(
        "--env-package",
        "--gym-packages",
        dest="env_package",
        nargs="+",
        default=None,
        metavar="MODULE",
        help="modules imported before the env is made (they register custom envs)",
    )
    add_sources(parser)
    if hub:
        parser.add_argument("--no-hub", action="store_true", help="do not try the Hugging Face hub")


def add_spec(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        default="auto",
        help="auto: per-tensor Linear, per-output-channel Conv (QuaRL's choice)",
    )
    parser.add_argument("--symmetric", action="store_true", help="symmetric narrow-range grid instead of QuaRL's")
    parser.add_argument("--quantize-bias", action="store_true", help="quantize biases too (QuaRL kept them fp32)")
    parser.add_argument(
        "--layers",
        choices=LAYER_MODES,
        default="paper",
        help="paper: the acting weights; quarl-code: what the original QuaRL code quantized",
    )


def add_recipe(parser: argparse.ArgumentParser) -> None:
    """PTQ beyond round-to-nearest weights: activations, groups, calibrated rounding, pruning."""
    for flag, what in (
        ("--act-bits", "each acting layer's input"),
        ("--obs-bits", "the observation after normalisation (per feature; 32 beside --act-bits: kept fp32)"),
        ("--out-bits", "the output layer's output"),
        ("--state-bits", "a recurrent policy's hidden and cell state after every step"),
        ("--norm-bits", "every LayerNorm/GroupNorm output (fp32 without it)"),
        ("--softmax-bits", "every nn.Softmax output, attention's probabilities (fp32 without it)"),
    ):
        parser.add_argument(
            flag,
            type=named_precision(flag.removeprefix("--").replace("-", " ")),
            default=None,
            metavar="P",
            help=f"quantize {what} at P (an integer width or a format), calibrated on visited states",
        )
    parser.add_argument("--group-size", type=group_size, default=0, help="integer weights: one grid per G inputs")
    roundings = ROUNDINGS.names()
    parser.add_argument(
        "--ptq",
        choices=roundings,
        default="rtn",
        help="weight rounding: " + ", ".join(f"{name} ({ROUNDINGS.get(name).label})" for name in roundings),
    )
    parser.add_argument(
        "--prune", type=prune_share, default=0.0, metavar="SHARE", help="zero this share of acting weights first"
    )
    parser.add_argument("--prune-structure", choices=PRUNE_STRUCTURES, default="unstructured")
    parser.add_argument(
        "--calibration-states",
        type=positive_int,
        default=DEFAULT_CALIBRATION_STATES,
        help="visited states (fp32 agent, seeded apart from evaluation) that calibrate ranges and rounding",
    )
    parser.add_argument(
        "--calibration-method",
        choices=ACT_CALIBRATION_METHODS,
        default="minmax",
        help="activation ranges: min-max, 0.01/99.99 percentiles, or the least-MSE shrink (default %(default)s)",
    )


def spec_from_args(args: argparse.Namespace, precision: str, recipe: bool = True) -> QuantSpec:
    """The QuantSpec a command's flags say for one precision: :func:`add_spec`'s grid options and, where the
    command has them (``recipe``), :func:`add_recipe`'s.

    :raises QuarlError: for a combination QuantSpec refuses, naming the bad value.
    """
    options: dict[str, Any] = recipe_options(args) if recipe and hasattr(args, "ptq") else {}
    grid: dict[str, Any] = {
        name: getattr(args, name) for name in ("granularity", "symmetric", "quantize_bias") if hasattr(args, name)
    }
    return QuantSpec(precision, layers=getattr(args, "layers", "paper"), **grid, **options)


def recipe_options(args: argparse.Namespace) -> dict[str, Any]:
    """QuantSpec keyword arguments from :func:`add_recipe`'s flags."""
    return {
        "act_bits": args.act_bits or "",
        "obs_bits": args.obs_bits or "",
        "out_bits": args.out_bits or "",
        **{name: getattr(args, name, None) or "" for name in ("state_bits", "norm_bits", "softmax_bits")},
        "group_size": args.group_size,
        "ptq": args.ptq,
        "prune": args.prune,
        "prune_structure": args.prune_structure,
        "calibration_states": args.calibration_states,
        "calibration_method": args.calibration_method,
    }


def add_evaluation(parser: argparse.ArgumentParser, per: str, statistics: bool = False) -> None:
    """Episodes, envs, seed, store and --force: how each job of ``run``/``deploy`` is evaluated and kept; with
    ``statistics`` also several evaluation seeds, observation noise and evaluation workers."""
    parser.add_argument(
        "-n",
        "--episodes",
        type=positive_int,
        default=100,
        help=f"episodes per {per} (default %(default)s); -n counts episodes in evaluation commands, timesteps in training ones",
    )
    parser.add_argument(
        "--n-envs", type=positive_int, default=None, help="envs evaluated at once (default per env kind)"
    )
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed (env i gets seed + i)")
    if statistics:
        add_statistics(parser)
    add_store(parser)
    parser.add_argument("--force", action="store_true", help="re-run jobs already in the store")


def add_statistics(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--eval-seeds",
        type=int,
        nargs="+",
        default=None,
        metavar="S",
        help="several evaluation seeds: every precision once per seed, --episodes each (paired: "
        "fp32 and each precision share a seed's episodes); replaces --seed",
    )
    parser.add_argument(
        "--obs-noise",
        type=non_negative_float,
        default=0.0,
        metavar="SIGMA",
        help="std of Gaussian noise added to every observation the policies see, in their own units: the same as "
        "--perturb obs-noise-abs=SIGMA (default %(default)s)",
    )
    parser.add_argument(
        "--perturb",
        default="",
        metavar="COND",
        help="play every episode under a condition, NAME=SEVERITY,... (NAME~a/b: a severity drawn per episode), "
        f"or a name from zoo_configs/perturbations.yaml: {perturbations.help_text()}; docs/evaluation.md",
    )
    for outcome, what in (("success", "truthy: a success"), ("progress", "a share in [0, 1]")):
        parser.add_argument(
            f"--{outcome}",
            default="",
            metavar="FN",
            help=f"judge each episode's {outcome} with your function, FILE.py:FN or package.module:FN, called with "
            f"the finished episode (return, length, terminated, last info; its value {what}) instead of the env's "
            "info: docs/evaluation.md",
        )
    parser.add_argument(
        "--eval-workers",
        type=positive_int,
        default=1,
        help="above 1: the envs are split over N forked processes, each stepping its share and "
        "running its own copy of the policy (Atari/PyBullet; the same episodes; default 1)",
    )


def add_calibration(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--calibration-states",
        type=positive_int,
        default=1000,
        help="ort-int8-static: visited observations that calibrate activation ranges (default %(default)s)",
    )
    parser.add_argument(
        "--calibration-method",
        choices=CALIBRATION_METHODS,
        default="minmax",
        help="ort-int8-static: how ranges are chosen from them (default %(default)s)",
    )


def add_executor(parser: argparse.ArgumentParser, unit: str, default_workers: str = "the cores") -> None:
    """Where a grid's ``unit`` (jobs, runs) execute: a local process pool or a Ray cluster."""
    parser.add_argument(
        "--workers", type=positive_int, default=None, help=f"parallel {unit} (default: {default_workers})"
    )
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help="process pool, or a Ray cluster")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local cluster)")


def check_executor(args: argparse.Namespace) -> None:
    """:raises QuarlError: for ``--address`` without ``--executor ray`` (it would be ignored)."""
    if args.address is not None and args.executor != "ray":
        raise QuarlError(
            f"bad --address {args.address!r} with --executor {args.executor}: a Ray address needs --executor ray"
        )


def add_timesteps(parser: argparse.ArgumentParser, default: int | None, help_text: str) -> None:
    """A training command's ``-n``: timesteps, as rl-zoo3 reads it (evaluation commands' ``-n`` counts episodes)."""
    parser.add_argument(
        "-n", "--timesteps", "--n-timesteps", dest="n_timesteps", type=positive_int, default=default, help=help_text
    )


CERTIFICATION_FLAGS = (
    "tolerance",
    "tolerance_abs",
    "confidence",
    "guarantee",
    "return_bounds",
    "catastrophe",
    "max_catastrophe_rate",
)
# what certify asks besides the paired return on the nominal simulator
OUTCOME_FLAGS = ("outcome", "success", "progress", "perturb", "unpaired", "equivalence")


def add_certification(parser: argparse.ArgumentParser, outcomes: tuple[str, ...] = OUTCOME_FLAGS) -> None:
    """The flags that say what a certification's verdict is judged against and guarantees (certify, export), from
    ``CertifyConfig``'s fields: their defaults and help are said there once; ``outcomes``: which of the outcome,
    the condition and the design the command takes (export's artifact always plays paired episodes)."""
    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.certify.outcome import CERTIFIED_OUTCOMES
    from quarl_bench.parsers.config_flags import config_flag
    from quarl_bench.statistics import GUARANTEES

    metavars = {"tolerance": "PCT", "tolerance_abs": "R", "catastrophe": "R", "max_catastrophe_rate": "EPS"}
    for name in CERTIFICATION_FLAGS + outcomes:
        extra: dict = {"metavar": metavars[name]} if name in metavars else {}
        if name == "guarantee":
            extra = {"choices": GUARANTEES}
        if name == "outcome":
            extra = {"choices": CERTIFIED_OUTCOMES}
        if name in ("success", "progress"):
            extra = {"metavar": "RULE"}
        if name == "perturb":
            extra = {"metavar": "COND"}
        if name == "return_bounds":
            extra = {"metavar": ("LO", "HI")}
        config_flag(parser, CertifyConfig, name, **extra)


def add_certify_settings(parser: argparse.ArgumentParser, whose: str, max_episodes: int | None = None) -> None:
    """The three certification settings of a command that certifies along the way (mixed's steps, harden's
    before/after): tolerance, confidence and the cap on paired episodes, from ``CertifyConfig``'s fields.

    :param whose: whose settings they are in the help (``certify's``, ``each step's``).
    :param max_episodes: the command's own cap (None: ``CertifyConfig``'s).
    """
    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.parsers.config_flags import config_flag, default_of

    config_flag(parser, CertifyConfig, "tolerance", help=f"{whose} δ, % of (R_fp32 - R_random)", metavar="PCT")
    config_flag(parser, CertifyConfig, "confidence", help=f"{whose} confidence, in (0.5, 1)")
    cap = max_episodes or default_of(CertifyConfig, "max_episodes")
    help_text = f"{whose} cap on paired episodes (default {cap})"
    config_flag(parser, CertifyConfig, "max_episodes", alone=False, default=max_episodes, help=help_text)
