"""The registry of PTQ weight-rounding algorithms (``--ptq NAME``): round-to-nearest, built in, and one module per
calibrated algorithm in ``quant/rounding/``, each registering itself with :func:`register_rounding` (its name, its
settings, which are part of every job key it makes, and a label for tables). A new algorithm is one module there:
the folder is read when a name is first asked for. This registry sits low in the house (specs validate against
it) and imports the algorithms by name only. Modules import torch inside their functions, so naming the
algorithms (``--help``, a spec's validation) stays fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quarl_bench.errors import QuarlError

NEAREST = "rtn"  # round to nearest: no calibration, the grid's own rounding


@dataclass(frozen=True)
class Rounding:
    """One calibrated rounding algorithm: ``round(weight, inputs, grid, layer_index) -> quantized weight`` on a
    2-D weight (rows: output channels), its layer inputs as rows, and the RTN grid (step, lowest and highest code
    per element)."""

    name: str
    label: str
    round: Callable[..., Any]
    settings: dict[str, float] = field(default_factory=dict)


_ROUNDINGS: dict[str, Rounding] = {}
_loaded = False


def register_rounding(name: str, label: str, settings: dict[str, float]) -> Callable[[Callable], Callable]:
    """Function decorator: the decorated ``(weight, inputs, grid, layer_index)`` is the rounding ``name``."""

    def decorate(function: Callable) -> Callable:
        _ROUNDINGS[name] = Rounding(name, label, function, dict(settings))
        return function

    return decorate


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        package = "quarl_bench.quant.rounding"
        for module in pkgutil.iter_modules(importlib.util.find_spec(package).submodule_search_locations):
            importlib.import_module(f"{package}.{module.name}")


def rounding_names() -> tuple[str, ...]:
    """``rtn`` and every registered algorithm's name."""
    _load()
    return (NEAREST, *_ROUNDINGS)


def rounding(name: str) -> Rounding:
    """The registered algorithm ``name``.

    :raises QuarlError: for a name that is not registered (never mapped to another), naming those that are.
    """
    _load()
    if name not in _ROUNDINGS:
        raise QuarlError(f"bad ptq method {name!r}: expected one of {', '.join(rounding_names())}")
    return _ROUNDINGS[name]


def rounding_label(name: str) -> str:
    """How tables name a rounding: ``RTN`` or the algorithm's label."""
    return "RTN" if name == NEAREST else rounding(name).label
