"""PTQ weight-rounding algorithms (``--ptq NAME``), one module each, and their registry beside them.

A module registers its algorithm with :func:`register_rounding`, naming its settings, which go into every job key it
makes (so a value type reads them, and this package sits below the values: its modules import nothing above it and
import torch inside the function). Round to nearest (:data:`NEAREST`) is the grid's own rounding and has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quarl_bench.registry import Registry


@dataclass(frozen=True)
class Rounding:
    """One PTQ weight-rounding algorithm (``--ptq NAME``): ``round(weight, inputs, grid, layer_index) -> quantized
    weight`` on a 2-D weight (rows: output channels), its layer inputs as rows (None for a data-free rounding,
    ``calibrated=False``), and the RTN grid (step, lowest and highest code per element); its settings are part of
    every job key it makes. Round to nearest has none."""

    name: str
    label: str
    round: Callable[..., Any] | None = None
    settings: dict[str, float] = field(default_factory=dict)
    calibrated: bool = True


NEAREST = "rtn"  # round to nearest: no calibration, the grid's own rounding
ROUNDINGS: Registry[Rounding] = Registry("ptq method", package=__name__)
ROUNDINGS.add(NEAREST, Rounding(NEAREST, "RTN", calibrated=False))


def register_rounding(
    name: str, label: str, settings: dict[str, float], calibrated: bool = True
) -> Callable[[Callable], Callable]:
    """Function decorator: the decorated ``(weight, inputs, grid, layer_index)`` is the rounding ``name``.

    :param calibrated: it reads the layer's inputs on visited calibration states (GPTQ, AdaRound); a data-free
        rounding (``False``) is passed ``inputs=None``, plays no calibration states and its specs say none.
    """

    def decorate(function: Callable) -> Callable:
        ROUNDINGS.add(name, Rounding(name, label, function, dict(settings), calibrated))
        return function

    return decorate
