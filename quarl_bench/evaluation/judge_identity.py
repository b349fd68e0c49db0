"""A judge's identity: its rule and the hash of its source, so that an edited judge is a new question. No torch, no
SB3: certification settings and job keys ask it before anything is loaded."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

from quarl_bench.errors import QuarlError

SOURCE_HASH = re.compile(r"@([0-9a-f]{12})$")  # a judge's identity ends in its source's hash


def is_function_rule(rule: str) -> bool:
    """Whether a ``--success`` / ``--progress`` rule names a function (``FILE.py:FN`` or ``module:FN``)."""
    return ":" in rule


def rule_identity(rule: str, flag: str = "--success") -> str:
    """A function rule with the hash of its source (``judge.py:ok@3f2a9c01b7de``); any other rule as it is.

    :raises QuarlError: for a file or module that is not there, in one line.
    """
    if not is_function_rule(rule) or SOURCE_HASH.search(rule):
        return rule
    return f"{rule}@{source_hash(rule, flag)}"


def source_hash(rule: str, flag: str = "--success") -> str:
    """The first 12 hex digits of the sha256 of the file that defines ``rule``'s function."""
    target = rule.rpartition(":")[0]
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise QuarlError(f"bad {flag} {rule!r}: no file {target!r}; expected FILE.py:FUNCTION")
    else:
        try:
            found = importlib.util.find_spec(target)
        except (ImportError, ValueError) as error:
            raise QuarlError(f"bad {flag} {rule!r}: cannot import {target!r} ({error})") from error
        if found is None or not found.origin or not Path(found.origin).is_file():
            raise QuarlError(f"bad {flag} {rule!r}: cannot import {target!r}")
        path = Path(found.origin)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def plain_rule(rule: str) -> tuple[str, str]:
    """A judge's rule without its source hash, and the hash ('' where it names none)."""
    found = SOURCE_HASH.search(rule)
    return (rule[: found.start()], found.group(1)) if found else (rule, "")
