"""Flags generated from config dataclasses: each option's default and help are said once, in the config, and a bad
value is refused with the config's own one-line message."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import quarl_bench
from quarl_bench.certify.config import CertifyConfig
from quarl_bench.cli import build_parser
from quarl_bench.statistics import TOLERANCE_PCT


def parsed(*argv: str):
    return build_parser().parse_args(list(argv))


def test_certify_s_flags_default_to_the_config_s_fields() -> None:
    args = parsed("certify", "--env", "CartPole-v1")
    for field in dataclasses.fields(CertifyConfig):
        if hasattr(args, field.name):
            assert getattr(args, field.name) == field.default, field.name
    assert args.tolerance == TOLERANCE_PCT == CertifyConfig().tolerance == 5.0


@pytest.mark.parametrize("command", ["certify", "export", "harden", "mixed", "report"])
def test_every_command_s_tolerance_is_the_one_default(command: str) -> None:
    argv = {"certify": ["--env", "x"], "export": ["--env", "x", "--backend", "ort-fp32", "--out", "o"]}
    argv["harden"] = ["--env", "x"]
    argv |= {"mixed": ["--env", "x"], "report": []}
    assert parsed(command, *argv[command]).tolerance == TOLERANCE_PCT


def test_the_tolerance_default_is_written_once_in_the_package() -> None:
    package = Path(quarl_bench.__file__).parent
    declared = [
        f"{path.relative_to(package)}:{number}"
        for path in package.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"tolerance\w*\s*(?::\s*float\s*)?=\s*5(\.0)?\b|default=5(\.0)?,", line)
    ]
    assert declared == [], declared  # statistics.TOLERANCE_PCT is read everywhere else


def test_help_is_the_field_s_docstring_and_a_bad_value_the_config_s_message(capsys) -> None:
    text = " ".join(build_parser()._subparsers._group_actions[0].choices["certify"].format_help().split())  # noqa: SLF001
    assert "paired episodes per look (default 20)" in text
    assert "δ as a percentage of (R_fp32 - R_random), in (0, 100) (default 5)" in text
    with pytest.raises(SystemExit) as exit_:
        parsed("certify", "--env", "x", "--confidence", "1.5")
    assert exit_.value.code == 2
    assert "bad confidence '1.5': expected a level in (0.5, 1)" in capsys.readouterr().err
