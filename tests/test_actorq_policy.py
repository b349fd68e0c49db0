"""The actors' int8 policies: ONNX Runtime's graph and torch's dynamic quantization act like the fp32 network,
hold int8 weights, and survive the quantizer's serialization."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from quarl_bench.actorq import onnx_policy
from quarl_bench.actorq.onnx_policy import OrtActorPolicy, int8_onnx_model, quantize_symmetric
from quarl_bench.actorq.policy import acting_network, build_policy, holds_int8_weights, load_payload, policy_payload


def test_the_actors_weights_are_the_symmetric_int8_grid_stored_portably() -> None:
    """uint8 codes with zero point 128 on the claim's grid (scale max|w| / 127): ORT's uint8 x uint8 kernels compute
    the same integers on every CPU, so no CPU feature picks another grid (7 bits on AVX2 did before)."""
    weight = np.array([[-0.5, 0.25], [1.27, 0.0]], np.float32)
    codes, scale = quantize_symmetric(weight)
    assert codes.dtype == np.uint8 and scale == pytest.approx(0.01)
    assert (codes.astype(int) - 128).tolist() == [[-50, 25], [127, 0]]
    assert not hasattr(onnx_policy, "weight_bits")


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
@pytest.mark.parametrize("squash", [False, True])
def test_int8_policy_matches_fp32_within_quantization_error(backend: str, squash: bool) -> None:
    torch.manual_seed(0)
    net = acting_network(8, 3, [256, 256], squash).eval()
    state = {k: v.clone() for k, v in net.state_dict().items()}
    observations = torch.randn(64, 8)
    with torch.inference_mode():
        expected = net(observations)
        kind, data = policy_payload(state, acting_network(8, 3, [256, 256], squash), "int8", backend)
        policy = load_payload(kind, data)
        got = policy(observations)
    assert kind == ("onnx" if backend == "onnxruntime" else "torch")
    assert holds_int8_weights(policy) and not holds_int8_weights(net)
    assert (got - expected).abs().max() < 0.05 * expected.abs().max()  # int8: ~1% here
    assert (got.argmax(1) == expected.argmax(1)).float().mean() > 0.9
    rebuilt = build_policy(state, acting_network(8, 3, [256, 256], squash), "int8", backend)
    with torch.inference_mode():
        assert torch.allclose(rebuilt(observations), got)


def test_onnx_graph_has_no_float_matmul() -> None:
    net = acting_network(4, 2, [32], squash=False)
    assert OrtActorPolicy(int8_onnx_model(net.state_dict(), squash=False)).int8
