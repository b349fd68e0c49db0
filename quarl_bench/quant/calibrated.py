"""Calibrated weight rounding on the very grid RTN uses (per tensor, per channel or per group, QuaRL's or the
symmetric one): GPTQ (Frantar et al. 2023) and learned rounding (AdaRound, Nagel et al. 2020).

Both take each acting layer in turn, in module order, with the inputs it receives from the already-quantized layers
before it on the calibration states, and choose each weight's code among the two grid points around it (AdaRound)
or by error feedback over the input columns (GPTQ); grid steps and code limits are those of the fp32 weights, so a
GPTQ row differs from its RTN row only in which grid points the weights land on.

Why not brevitas: its GPTQ runs on its own ``QuantLinear`` layers, whose scales come from its own weight statistics
(re-read from the updated weights); a comparison with RTN would then mix a change of grid into the change of
rounding. The algorithms are short; the grids are ours.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.quant.activations import record_tensors
from quarl_bench.quant.affine import as_groups, from_groups, group_grid, quant_step
from quarl_bench.quant.layers import acting_layers
from quarl_bench.types import PTQ_SETTINGS, QuantSpec

GPTQ, ADAROUND = PTQ_SETTINGS["gptq"], PTQ_SETTINGS["learned-round"]
ZETA, GAMMA = 1.1, -0.1  # AdaRound's rectified sigmoid stretch
MAX_ROWS = 32_768  # input rows per layer (a convolution has one per output position): a seeded sample beyond this


def grid_of(weight: torch.Tensor, spec: QuantSpec, per_channel: bool) -> tuple[torch.Tensor, ...]:
    """The RTN grid of a 2-D weight (rows: output channels) as per-element ``step``, lowest and highest code."""
    bits, symmetric = spec.bits, spec.symmetric
    if spec.group_size:  # codes, not values: the group's own 2**bits-code grid (affine.group_grid)
        groups, pad = as_groups(weight, spec.group_size)
        return tuple(
            from_groups(t.expand_as(groups).contiguous(), pad, weight) for t in group_grid(groups, bits, symmetric)
        )
    step = quant_step(weight, bits, per_channel, symmetric).expand_as(weight)
    lo = (weight.min(dim=1, keepdim=True).values if per_channel else weight.min()).expand_as(weight)
    hi = (weight.max(dim=1, keepdim=True).values if per_channel else weight.max()).expand_as(weight)
    step = torch.where(step > 0, step, torch.ones_like(step))
    if symmetric:
        limit = torch.full_like(step, 2 ** (bits - 1) - 1)
        return step, -limit, limit
    return step, torch.round(lo / step), torch.round(hi / step)


def layer_inputs(layer: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """A layer's inputs as rows matching its flattened weight's columns (im2col for convolutions)."""
    if isinstance(layer, nn.Conv2d):
        columns = nn.functional.unfold(
            inputs, layer.kernel_size, layer.dilation, layer.padding, layer.stride
        )  # (batch, in*kh*kw, positions)
        rows = columns.transpose(1, 2).reshape(-1, columns.shape[1])
    else:
        rows = inputs.reshape(-1, inputs.shape[-1])
    if len(rows) > MAX_ROWS:
        rows = rows[torch.randperm(len(rows), generator=torch.Generator().manual_seed(0))[:MAX_ROWS]]
    return rows


def gptq(weight: torch.Tensor, inputs: torch.Tensor, grid: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """GPTQ on one 2-D weight: columns quantized in order, each one's error spread over the columns not yet
    quantized through the inverse Hessian ``(2 X^T X)^-1``; returns the quantized weight."""
    step, lo, hi = grid
    w = weight.double().clone()
    x = inputs.double()
    hessian = 2 * x.T @ x / len(x)
    # inputs never active on the calibration states: kept (LLM GPTQ zeroes their weights), because the policy's own
    # trajectories may reach states where they are; with a unit diagonal they round to nearest, untouched
    dead = torch.diag(hessian) == 0
    hessian[dead, dead] = 1
    hessian += GPTQ["damping"] * torch.mean(torch.diag(hessian)) * torch.eye(len(hessian), dtype=hessian.dtype)
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


def learned_round(
    weight: torch.Tensor, inputs: torch.Tensor, grid: tuple[torch.Tensor, ...], seed: int
) -> torch.Tensor:
    """AdaRound on one 2-D weight: each weight rounds down or up on its grid, chosen by minimising the layer's
    output error on ``inputs`` plus a regulariser that drives the soft choice to 0 or 1 (annealed)."""
    step, lo, hi = grid
    floor = torch.floor(weight / step)
    rest = weight / step - floor
    # start at the RTN choice's soft value: h(v) = rest
    v = (-torch.log((ZETA - GAMMA) / (rest.clamp(0.01, 0.99) - GAMMA) - 1)).clone().requires_grad_(True)
    target = inputs @ weight.T
    optimizer = torch.optim.Adam([v], lr=ADAROUND["lr"])
    steps = int(ADAROUND["steps"])
    generator = torch.Generator().manual_seed(seed)
    for iteration in range(steps):
        rows = torch.randint(len(inputs), (min(len(inputs), int(ADAROUND["batch"])),), generator=generator)
        soft = torch.clamp(torch.sigmoid(v) * (ZETA - GAMMA) + GAMMA, 0, 1)
        w_soft = torch.clamp(floor + soft, lo, hi) * step
        error = torch.mean((inputs[rows] @ w_soft.T - target[rows]) ** 2)
        beta = 20 + (2 - 20) * iteration / steps
        regulariser = torch.sum(1 - torch.abs(2 * soft - 1) ** beta) if iteration > steps // 5 else 0.0
        optimizer.zero_grad()
        (error + ADAROUND["regulariser"] * regulariser).backward()
        optimizer.step()
    with torch.no_grad():
        hard = (torch.sigmoid(v) * (ZETA - GAMMA) + GAMMA >= 0.5).to(weight.dtype)
        return torch.clamp(floor + hard, lo, hi) * step


def calibrated_weights(policy: nn.Module, spec: QuantSpec, states: np.ndarray, per_channel_of) -> list[str]:
    """Round every acting layer's weight of ``policy`` (in place) with ``spec.ptq`` on its inputs over ``states``,
    layer by layer so each sees the quantized layers before it. Returns the layers' names.

    :param per_channel_of: ``is_conv -> bool``, the spec's granularity for a layer.
    """
    names = []
    for index, (name, layer) in enumerate(acting_layers(policy)):
        if not isinstance(layer, nn.Linear) and not (isinstance(layer, nn.Conv2d) and layer.groups == 1):
            raise QuarlError(
                f"--ptq {spec.ptq}: layer {name} ({type(layer).__name__}) is not supported: expected "
                "Linear or ungrouped Conv2d layers"
            )
        [inputs] = record_tensors(policy, states, [layer], output=False)
        columns = layer_inputs(layer, inputs)
        weight = layer.weight.detach().reshape(layer.weight.shape[0], -1).float()
        grid = grid_of(weight, spec, per_channel_of(not isinstance(layer, nn.Linear)))
        if spec.ptq == "gptq":
            quantized = gptq(weight, columns, grid)
        else:
            quantized = learned_round(weight, columns, grid, seed=index)
        with torch.no_grad():
            layer.weight.copy_(quantized.reshape(layer.weight.shape))
        names.append(name)
    return names
