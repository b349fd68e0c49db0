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
