"""Floating-point number formats for weights and activations: fp8 (e4m3, e5m2), OCP microscaling (MXFP4/6/8) and
NVIDIA's NVFP4.

- ``fp8-e4m3`` / ``fp8-e5m2``: one fp32 scale per tensor, ``amax / max_normal``; values cast through torch's
  ``float8_e4m3fn`` / ``float8_e5m2`` (round to nearest even), saturated at the format's largest finite value.
- ``mxfp4`` / ``mxfp6`` / ``mxfp8`` (OCP Microscaling Formats spec v1.0): blocks of 32 consecutive values of a row (a weight's
  input dimension) share a power-of-two scale ``2**(floor(log2(amax_block)) - emax_element)`` (the exponent read
  exactly with ``frexp``) (an E8M0 byte);
  elements are e2m1, e2m3 and e4m3, saturated at their largest normal.
- ``nvfp4``: e2m1 elements, blocks of 16 share an e4m3 scale ``amax_block / 6`` (rounded to e4m3), under one fp32
  scale per tensor that keeps the block scales inside e4m3's range: NVIDIA's two-level scheme.

:func:`round_minifloat` is the element rounding of any ExMy format (sign, IEEE-style bias, subnormals, no inf/NaN
codes used); tests hold it against hand-written codebooks and torch's own fp8 casts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Minifloat:
    """An ExMy element format: ``exponent_bits``, ``mantissa_bits`` and its largest finite value."""

    exponent_bits: int
    mantissa_bits: int
    max_value: float

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def emax(self) -> int:
        """Exponent of the largest normal (OCP's ``emax_elem``)."""
        return math.floor(math.log2(self.max_value))

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias


E2M1 = Minifloat(2, 1, 6.0)
E2M3 = Minifloat(2, 3, 7.5)
E4M3 = Minifloat(4, 3, 448.0)  # the "fn" variant: no inf, 448 is the largest finite value
E5M2 = Minifloat(5, 2, 57344.0)

FP8_DTYPES = {"fp8-e4m3": (torch.float8_e4m3fn, E4M3), "fp8-e5m2": (torch.float8_e5m2, E5M2)}
MX_ELEMENTS = {"mxfp4": E2M1, "mxfp6": E2M3, "mxfp8": E4M3}
MX_BLOCK, NV_BLOCK = 32, 16


def round_minifloat(x: torch.Tensor, fmt: Minifloat) -> torch.Tensor:
    """``x`` rounded to the nearest value of ``fmt`` (ties to even), saturated at ``±fmt.max_value``."""
    x = x.float()
    magnitude = x.abs().clamp(max=fmt.max_value)
    exponent = floor_log2(magnitude.clamp(min=torch.finfo(torch.float32).tiny))
    exponent = exponent.clamp(min=fmt.min_normal_exponent)  # below the normals: the subnormal spacing
    quantum = torch.exp2(exponent - fmt.mantissa_bits)
    rounded = (torch.round(magnitude / quantum) * quantum).clamp(max=fmt.max_value)
    return torch.sign(x) * rounded


def floor_log2(x: torch.Tensor) -> torch.Tensor:
    """``floor(log2(x))`` for positive ``x``, exactly: ``torch.frexp`` reads the float's own exponent, where
    ``torch.log2`` can round a value just below a power of two up to it (``log2(2**k - ulp) == k`` in float32)."""
    _, exponent = torch.frexp(x)
    return (exponent - 1).to(x.dtype)


def fp8_round_trip(x: torch.Tensor, name: str, amax: torch.Tensor | None = None) -> torch.Tensor:
    """Per-tensor scaled fp8: ``x / scale`` cast to torch's float8 dtype and back, ``scale = amax / max``.

    :param amax: the range the scale comes from (calibrated activations); default ``max |x|``.
    """
    dtype, fmt = FP8_DTYPES[name]
    amax = x.detach().abs().max() if amax is None else amax
    scale = torch.where(amax > 0, amax / fmt.max_value, torch.ones_like(amax))
    scaled = (x / scale).clamp(-fmt.max_value, fmt.max_value)  # the cast itself would give NaN above the max
    return scaled.to(dtype).to(x.dtype) * scale


def _blocks(x: torch.Tensor, block: int) -> tuple[torch.Tensor, int]:
    """``x`` as rows of ``block`` consecutive values (zero-padded), and the pad: a weight's rows are its output
    channels (a conv kernel flattened), an activation batch's rows its samples."""
    flat = x.reshape(x.shape[0], -1) if x.dim() > 1 else x.reshape(1, -1)
    pad = (-flat.shape[-1]) % block
    if pad:
        flat = torch.nn.functional.pad(flat, (0, pad))
    return flat.reshape(flat.shape[0], -1, block), pad


def _unblock(blocks: torch.Tensor, pad: int, like: torch.Tensor) -> torch.Tensor:
    flat = blocks.reshape(blocks.shape[0], -1)
    if pad:
        flat = flat[:, :-pad]
    return flat.reshape(like.shape).to(like.dtype)


def mx_round_trip(x: torch.Tensor, name: str) -> torch.Tensor:
    """OCP MX: a power-of-two scale per 32 values (along each row), elements in the MX element format."""
    fmt = MX_ELEMENTS[name]
    blocks, pad = _blocks(x.detach().float(), MX_BLOCK)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    shared = floor_log2(amax.clamp(min=torch.finfo(torch.float32).tiny)) - fmt.emax
    scale = torch.where(amax > 0, torch.exp2(shared), torch.ones_like(amax))
    return _unblock(round_minifloat(blocks / scale, fmt) * scale, pad, x)


def nvfp4_round_trip(x: torch.Tensor, name: str = "nvfp4") -> torch.Tensor:
    """NVFP4: e2m1 values, an e4m3 scale per 16 (along each row), one fp32 scale per tensor."""
    blocks, pad = _blocks(x.detach().float(), NV_BLOCK)
    tensor_amax = blocks.abs().max()
    if tensor_amax == 0:
        return x.detach().clone()
    global_scale = tensor_amax / (E4M3.max_value * E2M1.max_value)
    block_scale = blocks.abs().amax(dim=-1, keepdim=True) / E2M1.max_value / global_scale
    block_scale = block_scale.to(torch.float8_e4m3fn).float() * global_scale
    safe = torch.where(block_scale > 0, block_scale, torch.ones_like(block_scale))
    return _unblock(round_minifloat(blocks / safe, E2M1) * block_scale, pad, x)
