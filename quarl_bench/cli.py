"""``quarl-bench`` command line: argparse, and the one function each subcommand names as its ``handler`` (in the
``commands`` package). No torch, gymnasium or Ray is imported until a command runs, so ``--help`` and argument errors
are instant."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from quarl_bench.errors import Interrupted, QuarlError, show_notes
from quarl_bench.parsers import OneLineParser, deploy, evaluate, harden, method, read, record, reproduce, train, trials
from quarl_bench.registry import load_plugins

# the order ``quarl-bench --help`` lists them in
COMMANDS = (
    evaluate.add_run,
    evaluate.add_certify,
    evaluate.add_sensitivity,
    evaluate.add_mixed,
    evaluate.add_fidelity,
    evaluate.add_sweep,
    train.add_qat,
    train.add_amp,
    train.add_actorq,
    train.add_rollout,
    method.add_method,
    harden.add_harden,
    deploy.add_deploy,
    deploy.add_export,
    deploy.add_verify,
    deploy.add_table4,
    read.add_report,
    reproduce.add_reproduce,
    record.add_record,
    trials.add_trials,
    train.add_train,
    read.add_results,
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="quarl-bench", description="What does quantization do to RL policies?")
    parser.add_argument("--version", action="version", version=f"quarl-bench {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def installed_version() -> str:
    """The installed distribution's version (the checkout's pyproject when run uninstalled)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("quarl-bench")
    except PackageNotFoundError:
        return "unknown (not installed)"


def import_from_current_folder() -> None:
    """Let modules in the current folder be imported, as ``python -m`` would: a console script puts only its own
    folder on ``sys.path``, so ``--env my_pkg:MyEnv-v0`` would not find ``my_pkg.py`` beside the user. Child
    processes (evaluation workers, Ray workers, rl-zoo3's trainer) get it through ``PYTHONPATH``."""
    folder = os.getcwd()
    if folder not in sys.path and "" not in sys.path:
        sys.path.insert(0, folder)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder, *paths])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # installed plugins first: their names join the parsers' choices, and a broken one is one line
        load_plugins()
        parser = build_parser()
    except QuarlError as error:
        print(f"quarl-bench: error: {error}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    import_from_current_folder()
    from quarl_bench.store import provenance
    from quarl_bench.zoo.quiet import quiet_libraries

    provenance.set_command(argv)
    show_notes()
    backend_set = "MPLBACKEND" not in os.environ
    if backend_set:  # files only: no window, whatever display the shell has (this process and its workers)
        os.environ["MPLBACKEND"] = "Agg"
    try:
        with quiet_libraries():
            return args.handler(args)
    except Interrupted as error:
        print(f"quarl-bench: interrupted: {error}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # Ctrl-C anywhere else: one line, not a traceback through the worker pool's shutdown
        print("quarl-bench: interrupted (Ctrl-C): what was stored before it stays stored", file=sys.stderr)
        return 130
    except QuarlError as error:
        print(f"quarl-bench: error: {error}", file=sys.stderr)
        return 2
    finally:
        if backend_set:  # main() also runs inside other programs (a notebook, the tests)
            os.environ.pop("MPLBACKEND", None)


if __name__ == "__main__":
    raise SystemExit(main())
