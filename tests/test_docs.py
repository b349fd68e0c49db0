"""The docs site builds with no warning, and every command answers --help. (That the committed command reference
is the parser's is tests/test_doc_commands.py's job.)"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quarl_bench.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_has_help(cli, name: str) -> None:
    code, out, _ = cli(name, "--help")
    assert code == 0 and f"usage: quarl-bench {name}" in out


def test_docs_build_strict_with_the_generated_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    mkdocs = Path(sys.executable).with_name("mkdocs")
    built = subprocess.run(
        [str(mkdocs), "build", "--strict", "-d", str(site)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr  # --strict: a broken link or a page outside the nav fails it
    assert (site / "reference" / "cli" / "index.html").is_file()  # the generated page is in the site
