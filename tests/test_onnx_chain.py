"""An ONNX graph read back as a torch chain (``zoo/onnx_chain.py``), on graphs written node by node."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from quarl_bench.deploy.mlp import traced_chain  # noqa: E402
from quarl_bench.zoo.foreign import chain_reading  # noqa: E402


def graph(nodes: list, constants: dict[str, np.ndarray], width: int = 2) -> bytes:
    """A model from ``nodes`` with input ``obs`` (batch x width) and output ``out``."""
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "policy",
            [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", width])],
            [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in constants.items()],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    return model.SerializeToString()


def test_matmul_add_relu_sub_div_clip_read_as_a_chain_with_the_values_worked_by_hand() -> None:
    """out = clip((5 - relu(x @ W + b)) / 2, -1, 3) with W = [[1, 0], [0, -1]] (in x out), b = [1, 1]:
    x = (2, 3) gives relu(3, -2) = (3, 0), then (5 - .) / 2 = (1, 2.5); x = (-4, -4): relu(-3, 5) = (0, 5),
    then (2.5, 0) clipped to (2.5, 0); x = (10, 0): (11, 1) -> (-3, 2) -> (-1, 2)."""
    nodes = [
        helper.make_node("MatMul", ["obs", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["h"]),
        helper.make_node("Sub", ["five", "h"], ["flipped"]),
        helper.make_node("Div", ["flipped", "two"], ["halved"]),
        helper.make_node("Clip", ["halved", "low", "high"], ["out"]),
    ]
    constants = {"W": [[1, 0], [0, -1]], "b": [1, 1], "five": 5.0, "two": 2.0, "low": -1.0, "high": 3.0}
    reading = chain_reading(graph(nodes, constants))
    assert reading.module is not None, reading.reason
    linears = [m for m in reading.module.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 1 and linears[0].bias is not None  # the Add became the MatMul's bias
    with torch.no_grad():
        out = reading.module(torch.tensor([[2.0, 3.0], [-4.0, -4.0], [10.0, 0.0]]))
    assert out.tolist() == [[1.0, 2.5], [2.5, 0.0], [-1.0, 2.0]]


def test_a_final_clip_to_the_action_bounds_is_left_out_and_the_head_traces_for_c_int8() -> None:
    """Gemm (transB) -> Tanh -> Mul 2 -> Min/Max to [-2, 2]: the clip equals the Box's bounds and is dropped (the
    contract clips anyway); what is left traces into c-int8's chain: one dense layer, then tanh and a scale."""
    nodes = [
        helper.make_node("Gemm", ["obs", "W", "b"], ["pre"], transB=1),
        helper.make_node("Tanh", ["pre"], ["a"]),
        helper.make_node("Mul", ["a", "two"], ["scaled"]),
        helper.make_node("Min", ["scaled", "high"], ["below"]),
        helper.make_node("Max", ["below", "low"], ["out"]),
    ]
    constants = {"W": [[0.5, -0.5]], "b": [0.0], "two": 2.0, "high": [2.0], "low": [-2.0]}
    box = spaces.Box(-2.0, 2.0, (1,), np.float32)
    reading = chain_reading(graph(nodes, constants), box)
    assert reading.module is not None, reading.reason
    assert [type(step).__name__ for step in reading.module.steps] == ["Linear", "Tanh", "Multiply"]
    chain = traced_chain(reading.module)
    assert [type(item).__name__ if not isinstance(item, tuple) else item[0] for item in chain] == [
        "Linear",
        "Tanh",
        "scale",
    ]
    with torch.no_grad():  # 2 tanh(0.5 * 3 - 0.5 * 1) = 2 tanh(1)
        assert reading.module(torch.tensor([[3.0, 1.0]])).item() == pytest.approx(2 * np.tanh(1.0), abs=1e-6)


@pytest.mark.parametrize(
    ("node", "named"),
    [
        (helper.make_node("Softmax", ["pre"], ["out"], axis=1), "Softmax"),
        (helper.make_node("Add", ["pre", "obs"], ["out"]), "does not continue one chain"),
        (helper.make_node("Div", ["one", "pre"], ["out"]), "divides a constant"),
    ],
)
def test_a_graph_that_is_no_chain_is_named(node, named: str) -> None:
    nodes = [helper.make_node("Gemm", ["obs", "W"], ["pre"], transB=1), node]
    reading = chain_reading(graph(nodes, {"W": np.eye(2), "one": 1.0}))
    assert reading.module is None and named in reading.reason
