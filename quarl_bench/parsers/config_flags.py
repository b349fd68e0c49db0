"""Flags generated from a method's config dataclass (CleanRL's habit): each option is said once, in the config.

A field gives its flag ``--field-name``, its default and its help (the field's ``:param:`` text in the class
docstring, with the default appended). The flag only converts the text; the config validates when the command
builds it from :func:`config_from_args`, so a bad value is the config's own one-line message (exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import types
import typing
from typing import Any

_PARAM = re.compile(r":param (\w+):(.*?)(?=\n\s*:param |\n\s*:raises |\Z)", re.S)


_ROLE = re.compile(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`")  # :data:`~a.b.NAME` -> NAME


def field_help(config: type) -> dict[str, str]:
    """Each field's ``:param:`` text from ``config``'s docstring, on one line, as plain text."""
    found = {}
    for name, text in _PARAM.findall(config.__doc__ or ""):
        text = _ROLE.sub(r"\1", " ".join(text.split())).replace("``", "")
        found[name] = text.rstrip(".")
    return found


def _field(config: type, name: str) -> dataclasses.Field:
    fields = {field.name: field for field in dataclasses.fields(config)}
    if name not in fields:
        raise KeyError(f"{config.__name__} has no field {name!r}")
    return fields[name]


def default_of(config: type, name: str) -> Any:
    """The default ``config`` declares for field ``name``."""
    field = _field(config, name)
    return None if field.default is dataclasses.MISSING else field.default


def field_hint(config: type, name: str) -> Any:
    """Field ``name``'s type hint, with ``X | None`` read as ``X``; None where it names a type the config's module
    imports only for type checking (an ``AgentRef``: such fields get no flag of their own)."""
    try:
        hint = typing.get_type_hints(config)[name]
    except NameError:
        try:
            hint = typing.get_type_hints(config, localns=_value_types())[name]
        except NameError:
            return None
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    return hint


def _value_types() -> dict[str, Any]:
    from quarl_bench import types as value_types

    return {name: getattr(value_types, name) for name in dir(value_types) if not name.startswith("_")}


def _value_type(config: type, name: str) -> tuple[type, int | str | None]:
    """The type one value of field ``name`` converts to, and how many values the flag takes (None: one; a pair of
    floats: 2; ``tuple[int, ...]``: one or more), read from the field's type hint (``int | None`` is an int,
    ``tuple[float, float] | None`` a pair)."""
    hint = field_hint(config, name)
    if typing.get_origin(hint) is tuple:
        members = typing.get_args(hint)
        return members[0], "+" if members[-1] is Ellipsis else len(members)
    return hint, None


def _parser(convert: Any, label: str, config: type, name: str, alone: bool):
    """Text to value; with ``alone``, the value is also checked by building ``config`` with it (its message)."""
    from quarl_bench.errors import QuarlError

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            kind = "an integer" if convert is int else "a finite number"
            raise argparse.ArgumentTypeError(f"bad {label} {text!r}: expected {kind}") from None
        if alone:
            try:
                config(**{name: value})
            except QuarlError as error:  # the config's line, naming the value as it was typed
                message = str(error)
                for shown in (f"{value:g}" if isinstance(value, float) else str(value), str(value)):
                    message = message.replace(f" {shown}:", f" {text!r}:", 1)
                raise argparse.ArgumentTypeError(message) from None
        return value

    return parse


def config_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    config: type,
    name: str,
    help: str | None = None,
    alone: bool = True,
    flag: str | None = None,
    given_only: bool = False,
    **overrides: Any,
) -> None:
    """Add ``--name`` for ``config``'s field ``name``: its default, type and ``:param:`` help. ``help`` replaces
    the docstring's text (a command that uses the field in its own way); ``overrides`` go to ``add_argument``
    (a ``default`` of the command's own, ``metavar``, ``choices``). ``alone``: the value can be checked without the
    other fields (False where the config checks it against another field: it does so when built); ``flag``: the
    flag's name where it is not the field's (``env`` for ``env_id``); ``given_only``: the flag's value is None unless
    given (it overrides a study file's setting), its help still naming the config's default. A field without a
    default is a required flag."""
    field = _field(config, name)
    if given_only:
        overrides.setdefault("default", None)
    elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
        overrides.setdefault("required", True)
    if flag:
        overrides.setdefault("dest", name)
    flag = "--" + (flag or name).replace("_", "-")
    value_type, nargs = _value_type(config, name)
    default = overrides.pop("default", default_of(config, name))
    shown = default_of(config, name) if given_only else default
    text = (help or field_help(config).get(name, "") or f"{config.__name__}'s {name}").replace("%", "%%")
    if shown is not None and not isinstance(shown, bool) and "default" not in text:
        text += f" (default {_shown(shown)})"
    if value_type is bool:
        action = argparse.BooleanOptionalAction if default else "store_true"  # a default of True can be turned off
        parser.add_argument(flag, action=action, default=default, help=text, **overrides)
        return
    kwargs: dict[str, Any] = {
        "default": default,
        "help": text,
        "metavar": flag.removeprefix("--").replace("-", "_").upper(),
    }
    if nargs:
        kwargs["nargs"] = nargs
    if "choices" not in overrides:
        label = name.replace("_", " ")
        label = label.removesuffix("s") if nargs == 2 else label  # one of a pair: "bad return bound 'x'"
        numeric = value_type in (int, float)
        kwargs["type"] = _parser(value_type, label, config, name, alone and not nargs) if numeric else str
    parser.add_argument(flag, **(kwargs | overrides))


def _shown(value: Any) -> str:
    """A default as a user types it: 0.05, 16, 2048,2048,2048."""
    if isinstance(value, float):
        return f"{value:g}"
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def config_flags(
    parser: argparse.ArgumentParser, config: type, names: tuple[str, ...], linked: tuple[str, ...] = ()
) -> None:
    """:func:`config_flag` for each of ``names``; those in ``linked`` are checked against each other when the
    config is built."""
    for name in names:
        config_flag(parser, config, name, alone=name not in linked)


def config_from_args(config: type, args: argparse.Namespace, **given: Any) -> Any:
    """``config`` built from the parsed flags of its fields that the command has (and ``given``): it validates."""
    names = {field.name for field in dataclasses.fields(config) if field.init}
    values = {name: getattr(args, name) for name in names if hasattr(args, name)}
    for name, value in values.items():
        if isinstance(value, list):
            values[name] = tuple(value)
    return config(**(values | given))
