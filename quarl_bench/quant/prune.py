"""Magnitude pruning of the acting network (Lu et al. 2024 measured it beside quantization on SB3 policies), through
``torch.nn.utils.prune``: applied to the fp32 weights, before any quantization.

- ``unstructured``: in every acting layer, the ``share`` of its weights smallest in magnitude are zeroed.
- ``neurons``: in every hidden acting layer, the ``share`` of its output neurons with the smallest weight-row L2 norm
  are removed (row and bias zeroed, so the neuron outputs the activation of 0); output layers keep every action.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import prune

from quarl_bench.quant.activations import output_layers
from quarl_bench.quant.layers import acting_layers


def prune_acting(policy: nn.Module, share: float, structure: str) -> None:
    """Zero ``share`` of ``policy``'s acting weights by magnitude, in place (see the module docstring)."""
    outputs = {id(layer) for layer in output_layers(policy)}
    for _, layer in acting_layers(policy):
        if structure == "unstructured":
            prune.l1_unstructured(layer, "weight", amount=share)
            prune.remove(layer, "weight")
        elif id(layer) not in outputs:
            prune.ln_structured(layer, "weight", amount=share, n=2, dim=0)
            prune.remove(layer, "weight")
            if layer.bias is not None:
                dead = layer.weight.detach().reshape(layer.weight.shape[0], -1).abs().sum(dim=1) == 0
                with torch.no_grad():
                    layer.bias[dead] = 0


def nonzero_weights(policy: nn.Module) -> int:
    """Nonzero weights over the acting layers."""
    return int(sum(torch.count_nonzero(layer.weight.detach()) for _, layer in acting_layers(policy)))
