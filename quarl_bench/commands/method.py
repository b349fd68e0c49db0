"""``quarl-bench method NAME``: any registered method, its flags generated from its config (parse, one api call,
render)."""

from __future__ import annotations

import argparse
from typing import Any

from quarl_bench.commands.common import _agent_for
from quarl_bench.errors import QuarlError
from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore


def run_method(args: argparse.Namespace) -> int:
    """Build the method's config from its flags, run its work (stored rows are reused), print its rows."""
    from quarl_bench.api.sweep import run_method as run
    from quarl_bench.jobs.grids import EvalSettings
    from quarl_bench.parsers import OneLineParser
    from quarl_bench.parsers.arguments import check_executor
    from quarl_bench.parsers.config_flags import config_from_args
    from quarl_bench.parsers.method import field_roles, method_parser
    from quarl_bench.registry import METHODS

    name = args.method_name
    if name in METHODS.names():
        METHODS.load(name)
        if name not in METHODS.entries:  # a spec method evaluated by another's work (mixed: PTQ's)
            raise QuarlError(f"method {name!r} has no config of its own: {_played_by(name)}")
    config_type = METHODS.get(name)
    flags = method_parser(name, config_type, OneLineParser).parse_args(args.rest)
    check_executor(flags)
    roles = field_roles(config_type)
    with ResultStore(flags.store or DEFAULT_STORE) as store:
        given = _given(roles, flags, store)
        config = config_from_args(config_type, flags, **given)
        settings = EvalSettings(getattr(flags, "episodes", 100), getattr(flags, "eval_seed", 0))
        rows = run(config, store, settings, flags.cache, flags.executor, flags.address, flags.force, _line)
        _render(name, rows)
        console.print(f"Stored in {store.path}")
    return 0


def _given(roles: dict[str, str], flags: argparse.Namespace, store: ResultStore) -> dict[str, Any]:
    """The fields no flag of their own gives: the agent, and the precisions of ``--bits`` with the recipe flags."""
    from quarl_bench.commands.deploy import deploy_targets
    from quarl_bench.parsers.arguments import spec_from_args
    from quarl_bench.parsers.method import AGENT, SPEC, SPECS, TARGETS

    given: dict[str, Any] = {}
    for field, role in roles.items():
        if role == AGENT:
            given[field] = _agent_for(flags, store)
        elif role == SPECS:
            given[field] = tuple(spec_from_args(flags, precision) for precision in flags.bits)
        elif role == TARGETS:
            given[field] = deploy_targets(flags, flags.backend)
        elif role == SPEC:
            given[field] = spec_from_args(flags, flags.bits)  # one precision: --bits takes one
    return given


def _line(row: dict[str, Any], reused: bool) -> None:
    """One line per job as its row is stored or found (a result's reward; a side row's precision)."""
    from quarl_bench.report.console import result_line

    if "mean_reward" in row:
        console.print(result_line(row, reused))
    else:
        console.print(f"  {row.get('precision', row['key'])}: {'reused from the store' if reused else 'stored'}")


def _played_by(name: str) -> str:
    """Where a method without a config of its own is run: its command, else within other methods' works."""
    from quarl_bench.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    if name in commands:
        return f"run `quarl-bench {name}`"
    return "its jobs are played within other methods' works"


def _render(name: str, rows: list[dict[str, Any]]) -> None:
    """Result rows as every evaluating command shows them; a side table's rows by their scalar columns."""
    import pandas as pd

    from quarl_bench.report.console import result_table

    if not rows:
        console.print(f"{name}: no rows")
    elif "mean_reward" in rows[0] and "reference_key" in rows[0]:
        first = rows[0]
        console.print(result_table(rows, f"{first['algo']} / {first['env_id']} ({name})"))
    else:
        frame = pd.DataFrame(rows)
        hidden = ("key", "agent_hash", "created_at")  # identities: ``quarl-bench results`` shows them
        shown = [
            c
            for c in frame.columns
            if c not in hidden
            and not c.endswith("_key")
            and frame[c].map(lambda v: isinstance(v, (int, float, str))).all()
        ]
        console.print(frame[shown].to_string(index=False))
