"""docs/benchmarks.md quotes each benchmark's headline (its last line): the script must still print it. A quoted
line's text up to its first figure is looked for in the script's source, so a renamed or dropped headline fails
here, not in a reader's hands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "benchmarks.md").read_text()


def quoted_headlines() -> list[tuple[str, str]]:
    """(script, quoted line) from the list ('last line `...`') and from the latest-figures table."""
    found = []
    for item in re.split(r"\n- ", DOC.split("## Latest figures")[0]):
        script = re.search(r"benchmarks/(\w+\.py)", item)
        for line in re.findall(r"last line\s+`([^`]+)`", item):
            if script:
                found.append((script.group(1), line))
    for row in DOC.split("## Latest figures")[1].splitlines():
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        if len(cells) == 4 and cells[2].startswith("`"):
            found.append((re.search(r"(\w+\.py)", cells[0]).group(1), cells[2].split("`")[1]))
    return found


def literal_prefix(line: str) -> str:
    """The quoted line up to its first figure, placeholder (N.NN) or comma: the part a format string holds
    verbatim (a comma may be followed by a formatted word, as "held-out, finite-sample")."""
    return re.split(r"\d|\bN\b|N\.N|,", line, maxsplit=1)[0]


HEADLINES = quoted_headlines()


def test_the_doc_quotes_headlines() -> None:
    assert len(HEADLINES) >= 10 and {script for script, _ in HEADLINES} >= {"deploy_latency.py", "sweep_speed.py"}


@pytest.mark.parametrize(
    ("script", "line"), HEADLINES, ids=[f"{name}:{literal_prefix(text)[:30]}" for name, text in HEADLINES]
)
def test_each_quoted_headline_is_still_printed(script: str, line: str) -> None:
    source = (ROOT / "benchmarks" / script).read_text()
    prefix = literal_prefix(line).strip()
    assert prefix and prefix in source, f"{script} no longer prints {line!r}"
