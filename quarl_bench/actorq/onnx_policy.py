"""int8 actor policies on ONNX Runtime: the acting MLP as an ONNX graph of ORT's dynamic-quantization ops.

Measured on this project's 2-core CPU (``python benchmarks/actor_inference.py``), ORT's ``MatMulInteger`` runs a
2048x3 policy about twice as fast as torch's dynamic-quantized Linear at batch 1. The graph is the one
``onnxruntime.quantization.quantize_dynamic`` emits (DynamicQuantizeLinear -> MatMulInteger -> scale -> bias),
built here straight from the learner's state dict: exporting and re-quantizing with ORT takes ~1.5 s per broadcast,
this ~90 ms for 2048x3 (one thread, idle).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

from quarl_bench.quant.affine import to_grid


@cache
def weight_bits() -> int:
    """8, or 7 on an x86 CPU without VNNI. There ORT's u8 x s8 ``MatMulInteger`` uses ``vpmaddubsw``, which
    saturates int16 sums of pairs of products; ORT's ``quantize_dynamic(reduce_range=True)`` exists for this. Measured
    here (AVX2, no VNNI, ORT 1.32): 8-bit weights gave errors of 11% of a 256x256 policy's output, 7-bit ones 2%."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return 8
    x86 = " avx2 " in flags or " sse4_2 " in flags
    return 7 if x86 and not any(f" {vnni} " in flags for vnni in ("avx512_vnni", "avx_vnni", "amx_int8")) else 8


def quantize_symmetric(weight: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """Per-tensor symmetric int8 (scale = max|w| / (2**(b-1) - 1), zero point 0), as ORT's QInt8 weights: the
    ``symmetric`` grid of ``quant.affine`` at :func:`weight_bits` bits, stored as int8."""
    grid = to_grid(torch.from_numpy(np.ascontiguousarray(weight)), weight_bits(), "symmetric")
    return grid.codes.numpy().astype(np.int8), np.float32(grid.step)


def int8_onnx_model(state: dict[str, torch.Tensor], squash: bool, activation: str = "Relu") -> bytes:
    """Serialized ONNX model of the acting MLP (``acting_network``'s state-dict layout) with int8 weights;
    ``activation``: the ONNX op between layers (``Relu``, or ``Tanh`` for SB3's PPO/A2C default)."""
    layer_ids = sorted({int(key.split(".")[0]) for key in state})
    nodes, initializers = [], []
    current = "obs"
    for position, layer in enumerate(layer_ids):
        weight = state[f"{layer}.weight"].detach().float().numpy()
        bias = state[f"{layer}.bias"].detach().float().numpy()
        weight_q, weight_scale = quantize_symmetric(weight.T)  # MatMulInteger wants [in, out]
        name = f"l{position}"
        initializers += [
            numpy_helper.from_array(np.ascontiguousarray(weight_q), f"{name}_w"),
            numpy_helper.from_array(np.array(weight_scale, np.float32), f"{name}_w_scale"),
            numpy_helper.from_array(np.array(0, np.int8), f"{name}_w_zero"),
            numpy_helper.from_array(bias, f"{name}_b"),
        ]
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [current], [f"{name}_xq", f"{name}_xs", f"{name}_xz"]),
            helper.make_node(
                "MatMulInteger", [f"{name}_xq", f"{name}_w", f"{name}_xz", f"{name}_w_zero"], [f"{name}_acc"]
            ),
            helper.make_node("Cast", [f"{name}_acc"], [f"{name}_accf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{name}_xs", f"{name}_w_scale"], [f"{name}_scale"]),
            helper.make_node("Mul", [f"{name}_accf", f"{name}_scale"], [f"{name}_y"]),
            helper.make_node("Add", [f"{name}_y", f"{name}_b"], [f"{name}_out"]),
        ]
        current = f"{name}_out"
        if position < len(layer_ids) - 1:
            nodes.append(helper.make_node(activation, [current], [f"{name}_relu"]))
            current = f"{name}_relu"
    if squash:
        nodes.append(helper.make_node("Tanh", [current], ["squashed"]))
        current = "squashed"
    nodes.append(helper.make_node("Identity", [current], ["out"]))
    obs_dim = state[f"{layer_ids[0]}.weight"].shape[1]
    out_dim = state[f"{layer_ids[-1]}.weight"].shape[0]
    graph = helper.make_graph(
        nodes,
        "actor",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", obs_dim])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", out_dim])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


class OrtActorPolicy:
    """An ORT session on one thread, called like the torch policies (a float tensor in, a float tensor out)."""

    def __init__(self, model_bytes: bytes) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        graph = onnx.load_from_string(model_bytes).graph
        int8_weights = {i.name for i in graph.initializer if i.data_type == TensorProto.INT8 and i.dims}
        matmuls = [node for node in graph.node if node.op_type.startswith("MatMul") or node.op_type == "Gemm"]
        self.int8 = bool(matmuls) and all(n.op_type == "MatMulInteger" and n.input[1] in int8_weights for n in matmuls)

    def __call__(self, observations: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.session.run(None, {"obs": observations.float().numpy()})[0])
