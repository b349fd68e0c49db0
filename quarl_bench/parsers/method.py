"""``quarl-bench method NAME``: any registered method run from flags generated from its config's fields.

A method needs no parser of its own: each field of its config dataclass is a flag (its default, type and
``:param:`` help: :mod:`~quarl_bench.parsers.config_flags`); a field naming the agent (``ref``) takes the agent
flags of every single-agent command, a precision field (``QuantSpec``, or a tuple of them) takes ``--bits`` and the
PTQ recipe flags. The method's own parser is built when the command runs (its module is imported then), so
``quarl-bench --help`` imports no method.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any

from quarl_bench.deploy.targets import BACKENDS
from quarl_bench.errors import QuarlError
from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import (
    add_agent,
    add_cache,
    add_calibration,
    add_precisions,
    add_recipe,
    add_spec,
    add_store,
    positive_int,
)
from quarl_bench.parsers.config_flags import config_flag, field_hint
from quarl_bench.registry import METHODS
from quarl_bench.types import AgentRef, DeployTarget, QuantSpec

# fields whose flag is named for what a user types, as in every other command
FLAG_NAMES = {"env_id": "env"}
AGENT, SPEC, SPECS, TARGETS = "agent", "spec", "specs", "targets"  # fields the agent flags, --bits, --backend fill


def add_method(commands: Subcommands) -> None:
    method = commands.add_parser(
        "method",
        help="run any registered method from its config's flags (quarl-bench method NAME --help lists them)",
        description="Every registered method, its flags generated from its config's fields: the built-in "
        + ", ".join(METHODS.indexed())
        + ", and any module of methods/ or method registered in Python",
    )
    method.set_defaults(handler=handler("method:run_method"))
    method.add_argument("method_name", metavar="NAME", help="a registered method's name")
    method.add_argument("rest", nargs=argparse.REMAINDER, help="the method's own flags")


def field_roles(config: type) -> dict[str, str]:
    """How each init field of ``config`` gets its value: ``agent``, ``spec``, ``specs``, ``flag`` (its own), or
    ``default`` (a type no flag gives, left at its default).

    :raises QuarlError: for a required field no flag can give, naming it and its type.
    """
    roles = {}
    for field in dataclasses.fields(config):
        if not field.init:
            continue
        hint = field_hint(config, field.name)
        if hint is AgentRef:
            roles[field.name] = AGENT
        elif hint == tuple[QuantSpec, ...] and SPECS not in roles.values():  # the first: what --bits gives
            roles[field.name] = SPECS
        elif hint is QuantSpec and SPEC not in roles.values():
            roles[field.name] = SPEC
        elif hint == tuple[DeployTarget, ...] and TARGETS not in roles.values():
            roles[field.name] = TARGETS
        elif _flaggable(hint):
            roles[field.name] = "flag"
        elif field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
            roles[field.name] = "default"
        else:
            raise QuarlError(
                f"method {getattr(config, 'method', config.__name__)!r} needs its {field.name} ({field.type}), "
                "which no flag gives: run it from Python or its own command"
            )
    return roles


def _flaggable(hint: Any) -> bool:
    if typing.get_origin(hint) is tuple:
        return all(arg in (int, float, str, Ellipsis) for arg in typing.get_args(hint))
    return hint in (int, float, str, bool)


def method_parser(name: str, config: type, parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The parser of ``quarl-bench method NAME``: the config's fields, then evaluation, executor and store flags."""
    parser = parser_class(prog=f"quarl-bench method {name}", description=(config.__doc__ or "").split("\n\n")[0])
    roles = field_roles(config)
    if AGENT in roles.values():
        add_agent(parser)
    if SPEC in roles.values() or SPECS in roles.values():
        add_precisions(parser, "the precisions it quantizes to", required=True, many=SPECS in roles.values())
        takes = getattr(config, "spec_flags", ())  # only the spec flags the method applies (methods.protocol)
        if "grid" in takes:
            add_spec(parser)
        if "recipe" in takes:
            add_recipe(parser)
    if TARGETS in roles.values():
        backends = BACKENDS.names()
        parser.add_argument(
            "--backend", nargs="+", required=True, choices=backends, help=f"one or more of {', '.join(backends)}"
        )
        if "--calibration-states" not in parser._option_string_actions:  # the recipe flags have them
            add_calibration(parser)
    for field, role in roles.items():
        if role == "flag":
            config_flag(parser, config, field, alone=False, flag=FLAG_NAMES.get(field))
    if "episodes" not in roles:  # a method that evaluates itself has its own
        parser.add_argument("--episodes", type=positive_int, default=100, help="evaluation episodes per job")
    if "eval_seed" not in roles:
        parser.add_argument("--eval-seed", type=int, default=0, help="evaluation seed (env i gets seed + i)")
    if AGENT not in roles.values():  # the agent flags have it
        add_cache(parser)
    parser.add_argument("--force", action="store_true", help="re-run jobs already in the store")
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help="this process, or a Ray cluster")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local cluster)")
    add_store(parser)
    return parser
