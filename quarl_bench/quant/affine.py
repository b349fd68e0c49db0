"""Uniform fake quantization of a tensor, differentiable through a straight-through estimator.

The default grid is QuaRL's (Krishnan et al., 2019): ``range = |min| + |max|``, ``step = range / 2**bits``,
``w_q = round(w / step) * step``. Zero is exactly representable, the grid spans ``[min, max]`` and, for tensors
that hold both signs, quantizing twice changes nothing. It has up to ``2**bits + 1`` levels (the original
code does not clamp); ``symmetric=True`` gives the narrow-range grid integer kernels use instead:
``step = max|w| / (2**(bits-1) - 1)``, levels ``-(2**(bits-1) - 1) ... 2**(bits-1) - 1``.
"""

from __future__ import annotations

import torch


def quant_step(weight: torch.Tensor, bits: int, per_channel: bool, symmetric: bool) -> torch.Tensor:
    """The grid step, a scalar or one value per output channel (dim 0), broadcastable to ``weight``."""
    w = weight.detach()
    if per_channel and w.dim() > 1:
        flat = w.reshape(w.shape[0], -1)
        lo, hi = flat.min(dim=1).values, flat.max(dim=1).values
        shape = (-1,) + (1,) * (w.dim() - 1)
        lo, hi = lo.reshape(shape), hi.reshape(shape)
    else:
        lo, hi = w.min(), w.max()
    if symmetric:
        return torch.maximum(lo.abs(), hi.abs()) / (2 ** (bits - 1) - 1)
    return (lo.abs() + hi.abs()) / 2**bits


def fake_quant(weight: torch.Tensor, bits: int, per_channel: bool = False, symmetric: bool = False) -> torch.Tensor:
    """Round ``weight`` to a ``bits``-bit uniform grid, keeping its dtype.

    The backward pass is the straight-through estimator (gradient 1 everywhere), so QAT can reuse this op.
    A constant-zero tensor (or channel) has step 0 and is returned unchanged.
    """
    step = quant_step(weight, bits, per_channel, symmetric)
    safe_step = torch.where(step > 0, step, torch.ones_like(step))
    quantized = torch.round(weight.detach() / safe_step) * safe_step
    if symmetric:
        limit = (2 ** (bits - 1) - 1) * safe_step
        quantized = torch.clamp(quantized, -limit, limit)
    quantized = torch.where(step > 0, quantized, weight.detach())
    return weight + (quantized - weight).detach()


def cast_round_trip(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Store in ``dtype`` and compute in the original dtype (fp16/bf16 weight quantization), STE backward."""
    return weight + (weight.detach().to(dtype).to(weight.dtype) - weight).detach()
