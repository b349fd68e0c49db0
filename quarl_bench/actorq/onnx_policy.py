"""int8 actor policies on ONNX Runtime: the acting MLP as an ONNX graph of ORT's dynamic-quantization ops.

Measured on this project's 2-core CPU (``python benchmarks/actor_inference.py``), ORT's ``MatMulInteger`` runs a
2048x3 policy about twice as fast as torch's dynamic-quantized Linear at batch 1. The graph is the one
``onnxruntime.quantization.quantize_dynamic`` emits (DynamicQuantizeLinear -> MatMulInteger -> scale -> bias),
built here straight from the learner's state dict: exporting and re-quantizing with ORT takes ~1.5 s per broadcast,
this ~90 ms for 2048x3 (one thread, idle).

The weights take deploy's portable format (``deploy/ort_int8.py``): uint8 codes with zero point 128 on the symmetric
int8 grid, which ORT's uint8 x uint8 kernels compute exactly on every x86 and ARM CPU. Int8 weights would saturate
on a CPU without VNNI, where ORT's remedy drops them to 7 bits: the actors of one run on a cluster of mixed CPUs
then computed different policies.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

from quarl_bench.deploy.ort_int8 import WEIGHT_ZERO_POINT
from quarl_bench.quant.affine import to_grid


def quantize_symmetric(weight: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """Per-tensor symmetric int8 (scale = max|w| / 127, codes in [-127, 127]), the ``symmetric`` grid of
    ``quant.affine``, stored portably: uint8 codes + 128 (the same integers on every CPU)."""
    grid = to_grid(torch.from_numpy(np.ascontiguousarray(weight)), 8, "symmetric")
    return (grid.codes.numpy().astype(np.int16) + WEIGHT_ZERO_POINT).astype(np.uint8), np.float32(grid.step)


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
            numpy_helper.from_array(np.array(WEIGHT_ZERO_POINT, np.uint8), f"{name}_w_zero"),
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
        eight_bit = (TensorProto.INT8, TensorProto.UINT8)
        int8_weights = {i.name for i in graph.initializer if i.data_type in eight_bit and i.dims}
        matmuls = [node for node in graph.node if node.op_type.startswith("MatMul") or node.op_type == "Gemm"]
        self.int8 = bool(matmuls) and all(n.op_type == "MatMulInteger" and n.input[1] in int8_weights for n in matmuls)

    def __call__(self, observations: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.session.run(None, {"obs": observations.float().numpy()})[0])
