"""The ``quarl-bench`` subcommands' argparse definitions, one module per command family; ``cli.py`` assembles them."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import TypeAlias

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def handler(reference: str) -> Callable[[argparse.Namespace], int]:
    """A subcommand's ``handler=``: the function ``commands/MODULE.py:FUNCTION`` names, imported when it runs (so
    ``--help`` and argument errors import nothing heavy)."""
    module, _, name = reference.partition(":")

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"quarl_bench.commands.{module}"), name)(args)

    run.__qualname__ = reference
    return run
