"""A user's torch module or an ONNX graph played as an SB3 policy (``zoo/foreign.py``): all of it acts, on the
observations as they come."""

from __future__ import annotations

import torch
from torch import nn

from quarl_bench.families import (
    ActingChain,
    NetworkInput,
    Output,
    PolicyFamily,
    PolicyObject,
    network_output,
    register_family,
)


class Module(PolicyFamily):
    name = "module"
    acting = ("module",)
    quarl_code = (("module",), ())
    raw_observations = True

    def matches(self, policy: PolicyObject) -> bool:
        return isinstance(getattr(policy, "module", None), nn.Module)

    def squashed(self, policy: PolicyObject) -> bool:
        return False  # its actions are clipped to the bounds

    def scores(self, policy: PolicyObject, x: NetworkInput) -> torch.Tensor:
        return policy.module(x)

    def acting_chain(self, policy: PolicyObject) -> ActingChain:
        return ActingChain(None, (policy.module,), traced=True)

    def decision(self, policy: PolicyObject, observations: torch.Tensor) -> Output:
        return network_output(policy, policy.decision_values(observations))

    def decision_values(self, policy: PolicyObject, observations: torch.Tensor) -> torch.Tensor | None:
        return None if policy.outputs_actions else policy.decision_values(observations)

    def torch_refusal(self, policy: PolicyObject) -> str:
        if policy.torch_layers:
            return ""
        return onnx_refusal(policy.not_a_chain)


def onnx_refusal(reason: str) -> str:
    """One line: calibrated rounding and activation hooks need torch layers that really run, and an ONNX graph that
    is no MLP chain (``reason``) has none: its layers are the graph's initializers."""
    return (
        "calibrated rounding and activation quantization act on torch layers, and this ONNX policy is played as its "
        f"own graph: {reason} (expected a graph that is one MLP chain, an SB3 zip, a zoo agent or --policy-module)"
    )


register_family(Module())
