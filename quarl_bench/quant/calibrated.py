"""Calibrated weight rounding on the very grid RTN uses (per tensor, per channel or per group, QuaRL's or the
symmetric one), by any algorithm of the rounding registry (``rounding/``, one module per algorithm).

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
from quarl_bench.rounding import ROUNDINGS
from quarl_bench.types import QuantSpec

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
        if isinstance(layer.padding, str):
            raise QuarlError(
                f"a calibrated rounding reads a Conv2d's inputs as columns: padding={layer.padding!r} is not "
                "supported (expected numeric padding, as SB3's CNNs use)"
            )
        columns = nn.functional.unfold(
            inputs, layer.kernel_size, layer.dilation, layer.padding, layer.stride
        )  # (batch, in*kh*kw, positions)
        rows = columns.transpose(1, 2).reshape(-1, columns.shape[1])
    else:
        rows = inputs.reshape(-1, inputs.shape[-1])
    if len(rows) > MAX_ROWS:
        rows = rows[torch.randperm(len(rows), generator=torch.Generator().manual_seed(0))[:MAX_ROWS]]
    return rows


def calibrated_weights(policy: nn.Module, spec: QuantSpec, states: np.ndarray | None, per_channel_of) -> list[str]:
    """Round every acting layer's weight of ``policy`` (in place) with ``spec.ptq`` on its inputs over ``states``,
    layer by layer so each sees the quantized layers before it (a data-free rounding: on its weights alone, inputs
    None). Returns the layers' names.

    :param per_channel_of: ``is_conv -> bool``, the spec's granularity for a layer.
    """
    algorithm = ROUNDINGS.get(spec.ptq)
    rounding = algorithm.round
    assert rounding is not None  # RTN, the one rounding without a function, never comes here (quantize)
    names = []
    for index, (name, layer) in enumerate(acting_layers(policy)):
        if not isinstance(layer, nn.Linear) and not (isinstance(layer, nn.Conv2d) and layer.groups == 1):
            raise QuarlError(
                f"--ptq {spec.ptq}: layer {name} ({type(layer).__name__}) is not supported: expected "
                "Linear or ungrouped Conv2d layers"
            )
        columns = None  # a data-free rounding sees the weights and the grid only
        if algorithm.calibrated:
            assert states is not None  # a calibrated rounding's spec is calibrated (quantize checks the states)
            [inputs] = record_tensors(policy, states, [layer], output=False)
            columns = layer_inputs(layer, inputs)
        weight = layer.weight.detach().reshape(layer.weight.shape[0], -1).float()
        grid = grid_of(weight, spec, per_channel_of(not isinstance(layer, nn.Linear)))
        quantized = rounding(weight, columns, grid, index)
        with torch.no_grad():
            layer.weight.copy_(quantized.reshape(layer.weight.shape))
        names.append(name)
    return names
