"""Precisions as values: one registry of every number format a policy can be quantized to.

Code asks a :class:`Precision` what it is (``p.is_int``, ``p.bits``, ``p.round_trip(w)``), never its name's
prefix: a name such as ``int4-nf4`` cannot be taken for an integer width by accident, and an unknown name is
refused here, with the accepted ones. Importing this module costs no torch (the CLI parses ``--bits`` with it);
each round trip names the function that does it and is imported when used.

Adding a format: its round trip (a function of ``quant/formats.py``), one :func:`register` line below naming it,
and its test; specs, PTQ and the command line then take it by name (tests/test_precision.py shows it).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

from quarl_bench.errors import QuarlError
from quarl_bench.registry import Registry

MIN_BITS, MAX_BITS = 2, 32
KINDS = ("float", "int", "format")  # an IEEE cast (fp32/fp16/bf16); an integer grid; a scaled minifloat format


@dataclass(frozen=True)
class Precision:
    """A number format weights (and activations) are stored in.

    :param kind: ``float`` (fp32, fp16, bf16: a cast), ``int`` (an integer grid of 2**bits codes, its options in the
        QuantSpec) or ``format`` (fp8, MX, NVFP4: minifloat elements under shared scales).
    :param bits: bits per element.
    :param scale_bits: bits of shared scales per element (MX: one 8-bit exponent per 32 values = 0.25).
    :param round_trip_at: ``module:function(tensor, name)`` that stores a tensor in this format and reads it back.
    :param family: formats that form one ladder of widths (MX: mxfp8, mxfp6, mxfp4); '' = the name alone.
    :param tensor_scaled: one scale per tensor (fp8): a calibrated activation range fixes it (``amax``), where
        block-scaled formats (MX, NVFP4) take their scales from each block at run time.
    :param block: values per shared scale (MX 32, NVFP4 16): a partial block at the end still pays a whole scale;
        0 = ``scale_bits`` per element, rounded up over the tensor.
    :param tensor_scale_bits: bits of one scale per tensor (fp8's and NVFP4's fp32).
    """

    name: str
    kind: str
    bits: int
    scale_bits: float = 0.0
    round_trip_at: str = ""
    family: str = ""
    tensor_scaled: bool = False
    block: int = 0
    tensor_scale_bits: int = 0

    @property
    def ladder(self) -> str:
        """The family a width ladder walks: integers (and the float casts above them) share ``int``."""
        return "int" if self.kind != "format" else self.family or self.name

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_format(self) -> bool:
        return self.kind == "format"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def bits_per_weight(self) -> float:
        """Storage per weight with its scales counted (an integer grid's per-tensor scale rounds to 0)."""
        return self.bits + self.scale_bits

    def scale_bits_of(self, numel: int) -> int:
        """Bits a tensor of ``numel`` values spends on this format's scales."""
        if self.block:
            return self.tensor_scale_bits + round(self.scale_bits * self.block) * -(-numel // self.block)
        return self.tensor_scale_bits + math.ceil(self.scale_bits * numel)

    def round_trip(self, tensor: Any, amax: Any = None) -> Any:
        """``tensor`` stored at this precision and read back (integers: QuaRL's per-tensor grid); ``amax``: a
        calibrated range's largest magnitude, which fixes a tensor-scaled format's scale."""
        module, _, function = self.round_trip_at.partition(":")
        round_trip = getattr(importlib.import_module(module), function)
        if amax is not None and self.tensor_scaled:
            return round_trip(tensor, self.name, amax)
        return round_trip(tensor, self.name)

    def __str__(self) -> str:
        return self.name


PRECISIONS: Registry[Precision] = Registry("precision")  # integer widths are made on demand, not listed


def register(entry: Precision) -> Precision:
    """Make ``entry`` a precision every command and grid accepts by its name."""
    if entry.kind not in KINDS:
        raise ValueError(f"bad kind {entry.kind!r} for {entry.name}: expected one of {', '.join(KINDS)}")
    return PRECISIONS.add(entry.name, entry)


def names(kind: str | None = None) -> tuple[str, ...]:
    """The registered names (of one kind), in registration order; integer widths are not listed one by one."""
    return PRECISIONS.names(kind=kind) if kind else PRECISIONS.names()


def help_text() -> str:
    return f"an integer {MIN_BITS}-{MAX_BITS}, or one of {', '.join(names())}"


def precision(value: str | int | Precision) -> Precision:
    """The precision a user means: ``8``/``"8"``/``"int8"`` -> int8, ``32`` -> fp32, a registered name -> itself.

    :raises QuarlError: naming the value and the accepted ones.
    """
    if isinstance(value, Precision):
        return value
    text = str(value).strip().lower()
    if text in PRECISIONS.entries:
        return PRECISIONS.entries[text]
    digits = text[3:] if text.startswith("int") else text  # the one place a name's prefix is read
    if digits.isdigit() and MIN_BITS <= int(digits) <= MAX_BITS:
        width = int(digits)
        if width == 32:
            return PRECISIONS.entries["fp32"]
        return Precision(f"int{width}", "int", width, 0.0, "quarl_bench.quant.affine:grid_round_trip")
    if text in PRECISIONS:  # a plugin's format, registered when its package is first looked in
        return PRECISIONS.entries[text]
    raise QuarlError(f"bad precision '{value}': expected {help_text()}")


def parse_precision(value: str | int) -> str:
    """A precision's normalised name (what specs and the store hold)."""
    return precision(value).name


def precision_bits(name: str) -> int:
    """Bits per element of a precision (fp16 -> 16, mxfp4 -> 4; scales not counted)."""
    return precision(name).bits


def is_int(name: str) -> bool:
    """Whether a stored precision name is an integer width (for filtering table rows)."""
    return precision(name).is_int


CAST = "quarl_bench.quant.affine:cast_round_trip_named"
for _name, _bits in (("fp32", 32), ("fp16", 16), ("bf16", 16)):
    register(Precision(_name, "float", _bits, 0.0, CAST))
FORMATS = "quarl_bench.quant.formats"
for _name in ("fp8-e4m3", "fp8-e5m2"):  # one fp32 scale per tensor
    register(Precision(_name, "format", 8, 0.0, f"{FORMATS}:fp8_round_trip", tensor_scaled=True, tensor_scale_bits=32))
for _name, _bits in (("mxfp4", 4), ("mxfp6", 6), ("mxfp8", 8)):  # an E8M0 exponent per 32 values
    register(Precision(_name, "format", _bits, 8 / 32, f"{FORMATS}:mx_round_trip", "MX", block=32))
# an e4m3 scale per 16 values, and one fp32 per tensor
register(Precision("nvfp4", "format", 4, 8 / 16, f"{FORMATS}:nvfp4_round_trip", block=16, tensor_scale_bits=32))
