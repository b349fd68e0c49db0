"""An ONNX policy read back into torch: a graph whose acting path is one chain of dense layers, activations and
constant element-wise ops becomes an ``nn.Module`` computing the same function.

That twin is what lets an ONNX MLP take every method a torch module takes: activation quantization (the W8A8
claim ``ort-int8-static`` is gated against), calibrated rounding, and the torch-only backends (LiteRT, ExecuTorch,
``c-int8``/``c-int4``). A graph that is no such chain (a CNN, a branch, an op outside the list) stays a graph, played
on ONNX Runtime with weight-only PTQ, and :func:`read_chain` says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

ACTIVATION_OPS = {"Relu": nn.ReLU, "Tanh": nn.Tanh, "Sigmoid": nn.Sigmoid}
CHAIN_OPS = "Gemm, MatMul, Relu, Tanh, Sigmoid, Clip, and Add, Sub, Mul, Div, Min or Max with a constant"
AGREEMENT = 1e-4  # the twin's largest |difference| to ONNX Runtime, relative to the output's scale


class Multiply(nn.Module):
    """``x * value``: a constant (one, or one per feature) that torch.fx traces as a multiplication."""

    def __init__(self, value: np.ndarray) -> None:
        super().__init__()
        self.value: torch.Tensor
        self.register_buffer("value", torch.from_numpy(np.array(value, np.float32)))  # a copy: ONNX's are read-only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.value


class Offset(nn.Module):
    """``x + value``, as :class:`Multiply`."""

    def __init__(self, value: np.ndarray) -> None:
        super().__init__()
        self.value: torch.Tensor
        self.register_buffer("value", torch.from_numpy(np.array(value, np.float32)))  # a copy: ONNX's are read-only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.value


class Bound(nn.Module):
    """``minimum(x, value)`` (``upper``) or ``maximum(x, value)``: ONNX's Min/Max against a constant per feature."""

    def __init__(self, value: np.ndarray, upper: bool) -> None:
        super().__init__()
        self.upper = upper
        self.value: torch.Tensor
        self.register_buffer("value", torch.from_numpy(np.array(value, np.float32)))  # a copy: ONNX's are read-only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.minimum(x, self.value) if self.upper else torch.maximum(x, self.value)


class OnnxChain(nn.Module):
    """The chain's steps applied in order (``steps``: Linear, activations, :class:`Multiply`, :class:`Offset`, ...)."""

    def __init__(self, steps: list[nn.Module]) -> None:
        super().__init__()
        self.steps = nn.Sequential(*steps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.steps(x)


@dataclass(frozen=True)
class ChainReading:
    """The torch twin of a graph (None when it is not a chain) and, then, why not."""

    module: OnnxChain | None
    reason: str = ""


def read_chain(graph_bytes: bytes, input_name: str, bounds: tuple[np.ndarray, np.ndarray] | None) -> ChainReading:
    """The graph's acting path (to its first output) as an :class:`OnnxChain`, checked against ONNX Runtime on
    observations drawn around the origin. ``bounds``: a Box action space's (low, high); a Min/Max against exactly
    these at the end is left out (the contract clips to them anyway)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load_from_string(graph_bytes).graph
    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    acting = acting_nodes(graph)
    steps: list[nn.Module] = []
    current = input_name
    for index, node in enumerate(graph.node):
        if index not in acting:
            continue
        if node.op_type == "Constant":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
            continue
        tensors = [name for name in node.input if name and name not in constants]
        if tensors != [current] or len(node.output) != 1:
            return ChainReading(None, f"its {node.op_type} node {node.name or index!r} does not continue one chain")
        step = _step(node, constants, steps)
        if isinstance(step, str):
            return ChainReading(None, step)
        if step is not None:
            steps.append(step)
        current = node.output[0]
    if current != graph.output[0].name:
        return ChainReading(None, "its first output is not the end of the chain")
    steps = _without_final_bounds(steps, bounds)
    if not any(isinstance(step, nn.Linear) for step in steps):
        return ChainReading(None, "it has no dense layer (Gemm or MatMul with a constant weight)")
    twin = OnnxChain(steps).eval()
    disagreement = _disagreement(twin, graph_bytes, input_name, graph)
    if disagreement is None:
        return ChainReading(None, "its observation width is not fixed in the graph")
    if disagreement > AGREEMENT:
        return ChainReading(None, f"its torch reading differs from ONNX Runtime by {disagreement:.2g} (relative)")
    return ChainReading(twin)


def acting_nodes(graph) -> set[int]:
    """Indices of the nodes the first output (the action or its logits) depends on."""
    needed = {graph.output[0].name}
    acting: set[int] = set()
    for index in range(len(graph.node) - 1, -1, -1):  # ONNX nodes are topologically sorted
        node = graph.node[index]
        if needed.intersection(node.output):
            acting.add(index)
            needed.update(node.input)
    return acting


def _step(node, constants: dict[str, np.ndarray], steps: list[nn.Module]) -> nn.Module | str | None:
    """The torch step for one node; None where it folds into the step before (a MatMul's bias) or does nothing;
    a string saying why the node is outside the chain."""
    attributes = {a.name: _attribute(a) for a in node.attribute}
    operand = next((constants[name] for name in node.input if name in constants), None)
    op = node.op_type
    if op in ACTIVATION_OPS:
        return ACTIVATION_OPS[op]()
    if op == "Identity" or (op == "Flatten" and attributes.get("axis", 1) == 1) or (op == "Cast" and _to_float(node)):
        return None
    if op == "Gemm":
        if attributes.get("transA", 0) or operand is None or operand.ndim != 2:
            return "its Gemm has no constant weight or transposes the observation"
        weight = operand if attributes.get("transB", 0) else operand.T
        bias = constants.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        weight = weight * attributes.get("alpha", 1.0)
        bias = None if bias is None else np.broadcast_to(bias * attributes.get("beta", 1.0), weight.shape[:1])
        return _linear(weight, bias)
    if op == "MatMul":
        if node.input[0] in constants or operand is None or operand.ndim != 2:
            return "its MatMul has no constant weight on the right"
        return _linear(operand.T, None)
    if op == "Clip":
        low, high = (_scalar(constants.get(name)) for name in [*node.input[1:3], "", ""][:2])
        low, high = attributes.get("min", low), attributes.get("max", high)
        return nn.Hardtanh(-np.inf if low is None else float(low), np.inf if high is None else float(high))
    if op in ("Add", "Sub", "Mul", "Div", "Min", "Max") and operand is not None and operand.ndim <= 2:
        return _constant_op(op, operand.reshape(-1), node.input[0] in constants, steps)
    return f"it calls {op} (node {node.name!r}), outside the chain ({CHAIN_OPS})"


def _constant_op(op: str, value: np.ndarray, constant_first: bool, steps: list[nn.Module]) -> nn.Module | str | None:
    if op == "Add" and steps and isinstance(steps[-1], nn.Linear) and steps[-1].bias is None:
        last = steps[-1]  # MatMul then Add: the dense layer's bias
        if value.size in (1, last.out_features):
            steps[-1] = _linear(last.weight.detach().numpy(), np.broadcast_to(value, (last.out_features,)))
            return None
    if op == "Add":
        return Offset(value)
    if op == "Mul":
        return Multiply(value)
    if op == "Sub":
        return nn.Sequential(Multiply(-np.ones(1, np.float32)), Offset(value)) if constant_first else Offset(-value)
    if op == "Div" and not constant_first:
        return Multiply(1.0 / value)
    if op in ("Min", "Max"):
        return Bound(value, upper=op == "Min")
    return f"it divides a constant by the observation's chain ({op}), outside the chain ({CHAIN_OPS})"


def _without_final_bounds(steps: list[nn.Module], bounds: tuple[np.ndarray, np.ndarray] | None) -> list[nn.Module]:
    """``steps`` without a final clip to exactly the action bounds (what :func:`acting_graph` appends)."""
    if bounds is None:
        return steps
    low, high = (np.asarray(b, np.float32).reshape(-1) for b in bounds)
    while steps and isinstance(steps[-1], Bound):
        value = steps[-1].value.numpy().reshape(-1)
        if not np.array_equal(np.broadcast_to(value, low.shape), high if steps[-1].upper else low):
            break
        steps = steps[:-1]
    return steps


def _disagreement(twin: OnnxChain, graph_bytes: bytes, input_name: str, graph) -> float | None:
    """The twin's largest difference to ONNX Runtime on 16 observations, relative; None without a fixed width."""
    import onnxruntime as ort

    dims = next(i for i in graph.input if i.name == input_name).type.tensor_type.shape.dim
    width = [d.dim_value for d in dims[1:]]
    if not width or not all(width):
        return None
    batch = np.random.default_rng(0).normal(0, 2, size=(16, *width)).astype(np.float32)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(graph_bytes, options, providers=["CPUExecutionProvider"])
    fixed = dims[0].HasField("dim_value") and dims[0].dim_value == 1
    rows = [batch[i : i + 1] for i in range(len(batch))] if fixed else [batch]
    expected = np.concatenate([session.run(None, {input_name: row})[0] for row in rows]).astype(np.float64)
    with torch.no_grad():
        found = twin(torch.from_numpy(batch)).numpy().astype(np.float64).reshape(expected.shape)
    return float(np.abs(found - expected).max() / (1.0 + np.abs(expected).max()))


def _linear(weight: np.ndarray, bias: np.ndarray | None) -> nn.Linear:
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.array(weight, np.float32)))
        if bias is not None:
            layer.bias.copy_(torch.from_numpy(np.array(bias, np.float32)))
    return layer


def _attribute(attribute):
    from onnx import helper

    return helper.get_attribute_value(attribute)


def _to_float(node) -> bool:
    """A Cast to float32 (exports put one on the float input)."""
    from onnx import TensorProto

    return any(a.name == "to" and a.i == TensorProto.FLOAT for a in node.attribute)


def _scalar(value: np.ndarray | None) -> float | None:
    return None if value is None else float(np.asarray(value).reshape(-1)[0])
