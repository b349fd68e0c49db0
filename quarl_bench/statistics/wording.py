"""One vocabulary for "how many bits are safe" in every table and on the console: ``≤ 2`` when the narrowest width
tried is safe (narrower was not tried), ``> 8`` when not even the widest tried is, the width itself otherwise."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quarl_bench.types import QuantSpec


def safe_width_text(
    safe: int | str | None, tried: Iterable[int | str], bits_of: Callable[[Any], int] | None = None
) -> int | str:
    """``safe`` (the minimum safe width or precision, None when none is) worded against the widths ``tried``;
    ``safe`` itself (a number stays a number) when it needs no words.

    :param bits_of: the width of a precision name (``int5`` -> 5); identity for integer widths.
    """
    tried = list(tried)
    width = bits_of or (lambda value: int(value))
    if not tried:
        return "undetermined"
    if safe is None:
        return f"> {max(tried, key=width)}"
    if width(safe) <= min(width(t) for t in tried):
        return f"≤ {safe}"
    return safe


def spec_name(spec: QuantSpec) -> str:
    """How a verdict names its precision: the precision, with its grid and recipe where they differ from plain RTN."""
    parts = ["/".join(spec.layer_precisions) if spec.layer_precisions else spec.precision]
    if spec.number_format.is_int and spec.granularity != "auto":
        parts.append(spec.granularity)
    if spec.symmetric:
        parts.append("symmetric")
    if spec.recipe_label():
        parts.append(spec.recipe_label())
    return " ".join(parts)


def interval_against(lower: float, upper: float, delta_low: float, delta_high: float | None = None) -> str:
    """A verdict's interval against the bounds that decide it, with the digits that tell them apart: ``[-0.0969,
    0.1000] against -0.1000``; with an estimated δ, ``against -δ in [-21.40, -20.41]`` (safe is judged at -δ's upper
    end, -δ_low; unsafe at its lower end, -δ_high)."""
    delta_high = delta_low if delta_high is None else delta_high
    digits = 2
    while digits < 6 and (
        round(lower, digits) == round(-delta_low, digits) or round(upper, digits) == round(-delta_high, digits)
    ):
        digits += 1
    number = f"{{:.{digits}f}}"
    shown = f"[{number.format(lower)}, {number.format(upper)}]"
    if abs(delta_high - delta_low) < 1e-12:
        return f"{shown} against {number.format(-delta_low)}"
    return f"{shown} against -δ in [{number.format(-delta_high)}, {number.format(-delta_low)}]"


def outside_note(mean: float, lower: float, upper: float) -> str:
    """A note for a mean outside its own interval: the interval is the running intersection of a confidence
    sequence (valid at every look), which need not contain the last mean; '' otherwise."""
    if lower <= mean <= upper or mean != mean:
        return ""
    return "; the interval is the running intersection of the confidence sequence, which need not hold the mean"
