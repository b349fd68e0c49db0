"""The ``quarl-bench`` subcommands' argparse definitions, one module per command family; ``cli.py`` assembles them."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import NoReturn, TypeAlias

Subcommands: TypeAlias = "argparse._SubParsersAction[OneLineParser]"


def handler(reference: str) -> Callable[[argparse.Namespace], int]:
    """A subcommand's ``handler=``: the function ``commands/MODULE.py:FUNCTION`` names, imported when it runs (so
    ``--help`` and argument errors import nothing heavy)."""
    module, _, name = reference.partition(":")

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"quarl_bench.commands.{module}"), name)(args)

    run.__qualname__ = reference
    return run


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        print(f"quarl-bench: error: {message}", file=sys.stderr)
        raise SystemExit(2)
