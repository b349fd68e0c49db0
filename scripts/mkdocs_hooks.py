"""mkdocs hook: the command reference page, generated from quarl-bench's argparse parser at build time, so the
docs cannot drift from the flags."""

from __future__ import annotations

import argparse
import os

from mkdocs.structure.files import File, Files

PAGE = "reference/cli.md"


def reference_markdown() -> str:
    """One section per command: its help line, description and ``--help`` text."""
    from quarl_bench.cli import build_parser

    os.environ["COLUMNS"] = "110"  # argparse wraps help to the terminal width; fix it for reproducible pages
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in commands._choices_actions}
    lines = [
        "# Command reference",
        "",
        "Generated from the argparse parser (`quarl_bench/parsers/`) by `python scripts/mkdocs_hooks.py` and at every "
        "docs build. Bad values exit with code 2 and one line.",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
    ]
    for name, sub in commands.choices.items():
        lines += [
            "",
            f"## `quarl-bench {name}`",
            "",
            helps.get(name) or "",
            "",
            "```text",
            sub.format_help().rstrip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


def on_files(files: Files, config) -> Files:
    committed = files.get_file_from_path(PAGE)  # the copy kept in docs/ for readers of the repository
    if committed is not None:
        files.remove(committed)
    files.append(File.generated(config, PAGE, content=reference_markdown()))
    return files


if __name__ == "__main__":  # refresh the committed copy: python scripts/mkdocs_hooks.py
    from pathlib import Path

    target = Path(__file__).resolve().parents[1] / "docs" / PAGE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(reference_markdown())
    print(f"wrote {target}")
