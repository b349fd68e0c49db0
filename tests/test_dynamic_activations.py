"""The ``dynamic`` activation method is ONNX Runtime's dynamic quantization, value for value: each batch row on the
uint8 grid of its own range; and ``ort-int8-dynamic`` puts a Gemm's weights on the claim's grid (max |w| / 127),
so a layer of the artifact computes what the claim computes."""

from __future__ import annotations

import io

import numpy as np
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

from quarl_bench.deploy.ort_int8 import ort_int8
from quarl_bench.quant.activations import dynamic_round_trip
from quarl_bench.quant.quantize import quantize_tensor
from quarl_bench.types import QuantSpec


def _dynamic_quantize_linear(x: np.ndarray) -> np.ndarray:
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])
    outputs = [("q", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8)]
    graph = helper.make_graph(
        [node],
        "dql",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info(name, kind, None) for name, kind in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    q, scale, zero = session.run(None, {"x": x})
    return (q.astype(np.float32) - zero.astype(np.float32)) * scale


def test_each_row_is_rounded_as_onnx_runtime_rounds_the_one_observation_of_a_call() -> None:
    rng = np.random.default_rng(0)
    batch = np.stack([rng.normal(1.0, 3.0, (4, 6)), rng.uniform(0.5, 2.0, (4, 6))]).astype(np.float32)  # 2nd > 0
    ours = dynamic_round_trip(torch.as_tensor(batch), "int8").numpy()
    for row in range(len(batch)):
        assert np.array_equal(ours[row], _dynamic_quantize_linear(batch[row : row + 1])[0])
    assert len(np.unique(ours[1])) > 20 and 0.0 not in batch[1]  # the grid spans [0, max]: zero is held


def test_a_dynamic_int8_gemm_computes_what_its_claim_computes() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(32, 16)
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(layer, (torch.randn(1, 32),), buffer, input_names=["obs"], opset_version=17, dynamo=False)
    graph = ort_int8("ort-int8-dynamic", buffer.getvalue(), None, "minmax")
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    x = torch.randn(1, 32) * 3 + 1
    weight = quantize_tensor(layer.weight.detach(), QuantSpec("int8", granularity="per-tensor", symmetric=True), False)
    claim = dynamic_round_trip(x, "int8") @ weight.T + layer.bias.detach()
    fp32 = layer(x).detach()
    artifact = session.run(None, {"obs": x.numpy()})[0]
    assert np.abs(artifact - claim.numpy()).max() < 1e-5 < np.abs(artifact - fp32.numpy()).max()


def test_norm_and_softmax_outputs_round_by_flag_and_a_policy_without_them_is_told() -> None:
    import pytest
    from gymnasium import spaces

    from quarl_bench.errors import QuarlError
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.training.chunk_models import ChunkTransformer
    from quarl_bench.zoo.chunk_policies import chunked_policy, declared_chunk

    torch.manual_seed(0)
    module = ChunkTransformer(3, 1, size=4, execute=2, width=16)
    box, actions = spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (1,), np.float32)
    policy = chunked_policy(box, actions, module, declared_chunk(module, "act"))
    states = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    observation = torch.as_tensor(states[:8])

    def hooked(spec: QuantSpec) -> tuple[dict[str, int], np.ndarray]:
        quantized, _ = quantize(policy, spec, states)
        hooks = {name: len(m._forward_hooks) for name, m in quantized.module.named_modules() if m._forward_hooks}
        return hooks, quantized.chunks(observation).detach().numpy()

    base = QuantSpec("int8", act_bits="int8")
    plain, plain_chunks = hooked(base)
    rounded, rounded_chunks = hooked(QuantSpec("int8", act_bits="int8", norm_bits="int4", softmax_bits="int4"))
    assert plain == {}  # without the flags LayerNorm and softmax stay fp32
    norms = {f"encoder.{i}.norm{j}" for i in (0, 1) for j in (1, 2)}
    assert set(rounded) == norms | {f"encoder.{i}.attention.softmax" for i in (0, 1)}
    assert np.abs(rounded_chunks - plain_chunks).max() > 1e-3
    mlp = chunked_policy(box, actions, torch.nn.Sequential(torch.nn.Linear(3, 4)), declared_chunk(module, "act"))
    with pytest.raises(QuarlError, match="--norm-bits int8: this policy has no LayerNorm or GroupNorm module"):
        quantize(mlp, QuantSpec("int8", norm_bits="int8"), states)
