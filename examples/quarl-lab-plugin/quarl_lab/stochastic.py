"""Stochastic rounding (Gupta et al. 2015): each weight rounds up with probability equal to its distance past the
grid point below it, so the rounding is unbiased in expectation. Data-free: it reads no layer inputs, so its specs
play no calibration states. Seeded per layer, so a spec's key names one policy."""

from __future__ import annotations

from typing import Any

from quarl_bench.rounding import register_rounding

SETTINGS = {"seed": 0}


@register_rounding("stochastic", "stochastic rounding", SETTINGS, calibrated=False)
def stochastic(weight: Any, inputs: Any, grid: tuple[Any, ...], layer_index: int = 0) -> Any:
    """``weight`` on the RTN grid (step, lowest and highest code per element), each value rounded up with probability
    equal to its fractional position between the two codes around it; ``inputs`` is None (data-free)."""
    import torch

    step, lo, hi = grid
    position = weight / step
    below = torch.floor(position)
    draws = torch.rand(weight.shape, generator=torch.Generator().manual_seed(SETTINGS["seed"] * 1000 + layer_index))
    codes = torch.clamp(below + (draws < position - below).to(weight.dtype), lo, hi)
    return (codes * step).to(weight.dtype)
