"""The one definition of a b-bit uniform grid, used by PTQ/QAT, ActorQ's weight broadcasts and its int8 ONNX policy.

Three grid schemes, each ``w_q = (code - zero_point) * step`` with integer codes:

- ``quarl`` (QuaRL, Krishnan et al. 2019, bit-identical to harvard-edge/QuaRL ``new_ptq.py``):
  ``step = (|min| + |max|) / 2**bits``, ``code = round(w / step)`` (half to even), zero point 0, no clamp. Zero is
  exact, the grid spans ``[min, max]``, and it has up to ``2**bits + 1`` levels (the original code does not clamp).
- ``symmetric``: the narrow-range grid integer kernels use (ONNX Runtime's QInt8 weights):
  ``step = max|w| / (2**(bits-1) - 1)``, codes ``-(2**(bits-1) - 1) ... 2**(bits-1) - 1``.
- ``min-max``: asymmetric over ``[min, max]`` with exactly ``2**bits`` levels (codes ``0 ... 2**bits - 1``), so
  codes pack into ``bits`` bits: ActorQ's q_c broadcasts. Its offset is ``min`` itself (not rounded to a code).

Group-wise weights (``group_size``) use a grid of exactly ``2**bits`` codes per group, as GPTQ and torchao's int4
layouts do (:func:`group_grid`): asymmetric over the group's range widened to hold 0, with an integer zero point,
or the symmetric narrow-range grid with ``--symmetric``. QuaRL's grid would give a group up to ``2**bits + 1``
codes, which do not pack into ``bits`` bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

SCHEMES = ("quarl", "symmetric", "min-max")


@dataclass(frozen=True)
class Grid:
    """Integer codes of a tensor on a b-bit grid and how to map them back: ``w_q = codes * step + offset``."""

    codes: torch.Tensor
    step: torch.Tensor  # scalar, or one value per output channel broadcastable to codes
    offset: torch.Tensor

    def dequantize(self) -> torch.Tensor:
        return self.codes * self.step + self.offset


def _range(weight: torch.Tensor, per_channel: bool) -> tuple[torch.Tensor, torch.Tensor]:
    w = weight.detach()
    if per_channel and w.dim() > 1:
        flat = w.reshape(w.shape[0], -1)
        shape = (-1,) + (1,) * (w.dim() - 1)
        return flat.min(dim=1).values.reshape(shape), flat.max(dim=1).values.reshape(shape)
    return w.min(), w.max()


def quant_step(weight: torch.Tensor, bits: int, per_channel: bool, symmetric: bool, scheme: str | None = None):
    """The grid step, a scalar or one value per output channel (dim 0), broadcastable to ``weight``."""
    scheme = scheme or ("symmetric" if symmetric else "quarl")
    lo, hi = _range(weight, per_channel)
    if scheme == "symmetric":
        return torch.maximum(lo.abs(), hi.abs()) / (2 ** (bits - 1) - 1)
    if scheme == "min-max":
        return (hi - lo) / (2**bits - 1)
    return (lo.abs() + hi.abs()) / 2**bits


def to_grid(weight: torch.Tensor, bits: int, scheme: str = "quarl", per_channel: bool = False) -> Grid:
    """Integer codes of ``weight`` on a ``bits``-bit grid of ``scheme`` (see the module docstring).

    A constant tensor (or channel) has step 0: its step is reported as 1 and its codes reproduce it exactly
    (codes 0 with offset = the value for ``min-max``; for the zero-point grids a constant 0 stays 0).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"bad grid scheme {scheme!r}: expected one of {', '.join(SCHEMES)}")
    w = weight.detach()
    step = quant_step(w, bits, per_channel, False, scheme)
    safe = torch.where(step > 0, step, torch.ones_like(step))
    if scheme == "min-max":
        low, _ = _range(w, per_channel)
        codes = torch.clamp(torch.round((w - low) / safe), 0, 2**bits - 1)
        return Grid(codes, safe, low * torch.ones_like(safe))
    codes = torch.round(w / safe)
    if scheme == "symmetric":
        limit = 2 ** (bits - 1) - 1
        codes = torch.clamp(codes, -limit, limit)
    return Grid(codes, safe, torch.zeros_like(safe))


def fake_quant(
    weight: torch.Tensor, bits: int, per_channel: bool = False, symmetric: bool = False, group_size: int = 0
) -> torch.Tensor:
    """Round ``weight`` to a ``bits``-bit grid (QuaRL's, or ``symmetric``), keeping its dtype.

    ``group_size``: one grid per ``group_size`` consecutive input values of each output channel (the int4
    weight-only layout of GPTQ and torchao) instead of per tensor or per channel.

    The backward pass is the straight-through estimator (gradient 1 everywhere), so QAT can reuse this op.
    A constant-zero tensor (or channel) is returned unchanged.
    """
    if group_size:
        groups, pad = as_groups(weight.detach(), group_size)
        step, low, high = group_grid(groups, bits, symmetric)
        quantized = from_groups(torch.clamp(torch.round(groups / step), low, high) * step, pad, weight)
        return weight + (quantized - weight).detach()
    grid = to_grid(weight, bits, "symmetric" if symmetric else "quarl", per_channel)
    step = quant_step(weight, bits, per_channel, symmetric)
    quantized = torch.where(step > 0, grid.dequantize(), weight.detach())
    return weight + (quantized - weight).detach()


def group_grid(groups: torch.Tensor, bits: int, symmetric: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each group's (row's) ``2**bits``-code grid as (step, lowest code, highest code), one column each, with
    ``w_q = clamp(round(w / step), lowest, highest) * step``.

    Asymmetric: ``step = (max(hi, 0) - min(lo, 0)) / (2**bits - 1)``, zero point ``round(-min(lo, 0) / step)``, codes
    ``-zero_point ... 2**bits - 1 - zero_point`` (zero exact, as integer kernels need). Symmetric: ``step = max|w| /
    (2**(bits-1) - 1)``, codes ``±(2**(bits-1) - 1)``. A constant-zero group gets step 1 (it stays 0).
    """
    low = torch.minimum(groups.min(dim=1, keepdim=True).values, torch.zeros(()))
    high = torch.maximum(groups.max(dim=1, keepdim=True).values, torch.zeros(()))
    if symmetric:
        limit = 2 ** (bits - 1) - 1
        step = torch.maximum(low.abs(), high) / limit
        step = torch.where(step > 0, step, torch.ones_like(step))
        return step, torch.full_like(step, -limit), torch.full_like(step, limit)
    step = (high - low) / (2**bits - 1)
    step = torch.where(step > 0, step, torch.ones_like(step))
    zero_point = torch.round(-low / step)
    return step, -zero_point, 2**bits - 1 - zero_point


def cast_round_trip(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Store in ``dtype`` and compute in the original dtype (fp16/bf16 weight quantization), STE backward."""
    return weight + (weight.detach().to(dtype).to(weight.dtype) - weight).detach()


def as_groups(weight: torch.Tensor, group_size: int) -> tuple[torch.Tensor, int]:
    """Rows of ``group_size`` consecutive input values per output channel (a conv kernel flattened); a short last
    group is padded by repeating its last value, which leaves its range, so its grid, unchanged."""
    flat = weight.reshape(weight.shape[0], -1) if weight.dim() > 1 else weight.reshape(1, -1)
    pad = (-flat.shape[1]) % group_size
    if pad:
        flat = torch.cat([flat, flat[:, -1:].expand(-1, pad)], dim=1)
    return flat.reshape(-1, group_size), pad


def from_groups(groups: torch.Tensor, pad: int, like: torch.Tensor) -> torch.Tensor:
    rows = like.shape[0] if like.dim() > 1 else 1
    flat = groups.reshape(rows, -1)
    if pad:
        flat = flat[:, :-pad]
    return flat.reshape(like.shape)


def activation_grid_parameters(low: torch.Tensor, high: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The step and zero point (a code in [0, 2**bits - 1]) of the asymmetric grid of ``[low, high]``, widened to
    hold zero: what integer kernels (``c-int8``) need to reproduce :func:`activation_grid`."""
    low, high = torch.minimum(low, torch.zeros_like(low)), torch.maximum(high, torch.zeros_like(high))
    step = (high - low) / (2**bits - 1)
    step = torch.where(step > 0, step, torch.ones_like(step))
    return step, torch.round(-low / step)


def activation_grid(x: torch.Tensor, low: torch.Tensor, high: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` on the asymmetric ``bits``-bit grid of ``[low, high]`` (activations and observations): ``2**bits``
    levels, zero exact (the zero point is rounded to a code, as integer kernels need), values outside saturate."""
    step, zero_point = activation_grid_parameters(low, high, bits)
    codes = torch.clamp(torch.round(x / step) + zero_point, 0, 2**bits - 1)
    return (codes - zero_point) * step


def grid_round_trip(weight: torch.Tensor, name: str) -> torch.Tensor:
    """``weight`` on QuaRL's per-tensor grid of the integer precision ``name`` (``int4``): its registry round trip
    (:mod:`quarl_bench.precision`)."""
    from quarl_bench.precision import precision

    return fake_quant(weight, precision(name).bits)


def cast_round_trip_named(weight: torch.Tensor, name: str) -> torch.Tensor:
    """``weight`` cast to the float precision ``name`` (``fp16``, ``bf16``) and back, fp32 itself: the registry's
    round trip of the float precisions."""
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    return weight if name == "fp32" else cast_round_trip(weight, dtypes[name])
