"""Learned rounding (AdaRound, Nagel et al. 2020) on one layer: each weight rounds down or up on its grid, chosen by
minimising the layer's output error on its inputs plus an annealed regulariser that drives the choice to 0 or 1."""

from __future__ import annotations

from typing import Any

from quarl_bench.rounding import register_rounding

SETTINGS = {"steps": 1000, "lr": 0.01, "regulariser": 0.01, "batch": 256}
ZETA, GAMMA = 1.1, -0.1  # AdaRound's rectified sigmoid stretch


@register_rounding("learned-round", "learned rounding", SETTINGS)
def learned_round(weight: Any, inputs: Any, grid: tuple[Any, ...], layer_index: int = 0) -> Any:
    """AdaRound on one 2-D weight: each weight rounds down or up on its grid, chosen by minimising the layer's
    output error on ``inputs`` plus a regulariser that drives the soft choice to 0 or 1 (annealed); seeded by
    the layer's index."""
    import torch

    step, lo, hi = grid
    floor = torch.floor(weight / step)
    rest = weight / step - floor
    # start at the RTN choice's soft value: h(v) = rest
    v = (-torch.log((ZETA - GAMMA) / (rest.clamp(0.01, 0.99) - GAMMA) - 1)).clone().requires_grad_(True)
    target = inputs @ weight.T
    optimizer = torch.optim.Adam([v], lr=SETTINGS["lr"])
    steps = int(SETTINGS["steps"])
    generator = torch.Generator().manual_seed(layer_index)
    for iteration in range(steps):
        rows = torch.randint(len(inputs), (min(len(inputs), int(SETTINGS["batch"])),), generator=generator)
        soft = torch.clamp(torch.sigmoid(v) * (ZETA - GAMMA) + GAMMA, 0, 1)
        w_soft = torch.clamp(floor + soft, lo, hi) * step
        error = torch.mean((inputs[rows] @ w_soft.T - target[rows]) ** 2)
        beta = 20 + (2 - 20) * iteration / steps
        regulariser = torch.sum(1 - torch.abs(2 * soft - 1) ** beta) if iteration > steps // 5 else 0.0
        optimizer.zero_grad()
        (error + SETTINGS["regulariser"] * regulariser).backward()
        optimizer.step()
    with torch.no_grad():
        hard = (torch.sigmoid(v) * (ZETA - GAMMA) + GAMMA >= 0.5).to(weight.dtype)
        return torch.clamp(floor + hard, lo, hi) * step
