"""GPTQ (Frantar et al. 2023) on one layer: columns quantized in order, each one's error spread over the columns not
yet quantized through the inverse Hessian of the layer's inputs."""

from __future__ import annotations

from typing import Any

from quarl_bench.rounding import register_rounding

# 10% of the Hessian's mean diagonal, not LLM GPTQ's 1%: RL calibration states are few and alike (a deterministic
# policy's trajectories), and weaker damping moved weights along directions the policy's own episodes then reached.
SETTINGS = {"damping": 0.1}


@register_rounding("gptq", "GPTQ", SETTINGS)
def gptq(weight: Any, inputs: Any, grid: tuple[Any, ...], layer_index: int = 0) -> Any:
    """GPTQ on one 2-D weight: columns quantized in order, each one's error spread over the columns not yet
    quantized through the inverse Hessian ``(2 X^T X)^-1``; returns the quantized weight."""
    import torch

    step, lo, hi = grid
    w = weight.double().clone()
    x = inputs.double()
    hessian = 2 * x.T @ x / len(x)
    # inputs never active on the calibration states: kept (LLM GPTQ zeroes their weights), because the policy's own
    # trajectories may reach states where they are; with a unit diagonal they round to nearest, untouched
    dead = torch.diag(hessian) == 0
    hessian[dead, dead] = 1
    hessian += SETTINGS["damping"] * torch.mean(torch.diag(hessian)) * torch.eye(len(hessian), dtype=hessian.dtype)
    inverse = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(hessian)), upper=True)
    quantized = torch.zeros_like(w)
    step, lo, hi = step.double(), lo.double(), hi.double()
    for i in range(w.shape[1]):
        column = w[:, i]
        q = torch.clamp(torch.round(column / step[:, i]), lo[:, i], hi[:, i]) * step[:, i]
        quantized[:, i] = q
        error = (column - q) / inverse[i, i]
        w[:, i:] -= error.unsqueeze(1) @ inverse[i, i:].unsqueeze(0)
    return quantized.to(weight.dtype)
