"""What several commands share: the agent a command is about, and printing each row once."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.markup import escape

from quarl_bench.errors import QuarlError
from quarl_bench.report.console import console
from quarl_bench.store import DEFAULT_STORE, ResultStore
from quarl_bench.store.agent_names import ref_title


def agent_query(args: argparse.Namespace):
    """The agent flags of a single-agent command as an :class:`~quarl_bench.api.AgentQuery`."""
    from quarl_bench.api import AgentQuery

    return AgentQuery(
        args.env,
        args.algo,
        str(args.model) if args.model else None,
        args.policy_module,
        str(args.vecnormalize) if args.vecnormalize else None,
        dict(args.env_kwargs) if args.env_kwargs else None,
        tuple(args.env_package or ()),
        str(args.folder) if args.folder else None,
        str(args.cache) if args.cache else None,
        not getattr(args, "no_hub", False),
        args.train_if_missing,
        getattr(args, "seed", 0),
        args.trust_remote_code,
    )


def once_per_row(show: Callable[[dict, bool], None]) -> Callable[[dict, bool], None]:
    """``show`` for each stored row once (deploy hands the shared torch-fp32 reference back with every backend)."""
    shown: set[str] = set()

    def show_new(row: dict, reused: bool) -> None:
        if row["key"] not in shown:
            shown.add(row["key"])
            show(row, reused)

    return show_new


def _agent_for(args: argparse.Namespace, store: ResultStore | None = None):
    """Resolve and describe the agent of a single-agent command."""
    from quarl_bench.api import resolve

    if store is not None:
        store.check()
    ref = resolve(agent_query(args))
    from quarl_bench.zoo.forms import form_of

    where = ref.model_path or ref.run_dir
    shape = form_of(ref).shape(ref)  # an action chunk's (zoo/chunked.py), named where it acts
    console.print(f"Agent: [bold]{escape(ref_title(ref))}[/] from {escape(where)}" + (f"; {shape}" if shape else ""))
    if ref.saved_env_id != ref.env_id:
        console.print(f"Note: this agent was saved for {ref.saved_env_id}; it runs on {ref.env_id}.")
    return ref


def print_not_quantized(rows: list[dict[str, Any]]) -> None:
    from quarl_bench.report.console import not_quantized_line

    line = not_quantized_line(rows)
    if line:
        console.print(line)


def existing_store(path: Path | None) -> Path:
    """The store a reading command opens; it must exist (reading never creates one)."""
    path = path or DEFAULT_STORE
    if not Path(path).is_file():
        raise QuarlError(f"no results store at {str(path)!r}: run `quarl-bench run` or `sweep` first, or pass --store")
    return Path(path)


@contextmanager
def certify_progress(
    requests: list, quiet: bool = False, what: str = "questions"
) -> Iterator[Callable[[int, int], None] | None]:
    """Certification's progress over its questions (a bar on a terminal, a line per answer when redirected, each
    with the time elapsed and left; ``what`` names them, a record's with its plan); None when ``quiet``
    (``--json``)."""
    from quarl_bench.certify.driver import question_count
    from quarl_bench.progress import progress

    if quiet:
        yield None
        return
    with progress(question_count(requests), what) as update:
        yield lambda done, _total: update(completed=done)
