"""The ``quarl-bench`` subcommands' argparse definitions, one module per command family; ``cli.py`` assembles them."""

from __future__ import annotations

import argparse
from typing import TypeAlias

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
