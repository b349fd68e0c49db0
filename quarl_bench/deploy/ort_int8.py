"""ONNX Runtime's int8 graphs (``ort-int8-dynamic``, ``ort-int8-static``) in one format that computes the same
integers on every CPU ORT runs on.

Why uint8 weights: ORT's x86 kernel for uint8 activations x int8 weights on a CPU without VNNI (AVX2, AVX-512 without
VNNI) multiplies with ``vpmaddubsw``, which adds each pair of products into a *saturating* int16: with 8-bit weights
two products near 255 x 127 overflow, and the artifact computes other actions than on the machine that exported it.
ORT's own remedy, ``reduce_range``, drops the weights to 7 bits: the artifacts did so where the *exporting* CPU
lacked VNNI, under an int8 claim (dqn LunarLander then flipped 73.9% of its actions against that claim). Its uint8 x uint8 kernels instead widen both operands to int16 and add pairs into
int32 (``vpmaddwd``), which cannot saturate, on SSE, AVX2, AVX-512 and VNNI alike, and ARM's ``udot`` is exact too.
So the weights are stored as uint8 with zero point 128, on exactly the claim's symmetric int8 grid: codes
``round(w / s) + 128`` with ``s = max|w| / 127`` per output channel (``ort-int8-dynamic``: per tensor). The cost,
measured by ``benchmarks/deploy_latency.py``, is in docs/deployment.md ("CPUs").

Two more departures from ORT's defaults keep the artifact the policy it claims to be: the decision values (the
last layer's output: Q-values, logits, the action mean) stay in float, as in the claim (ORT would round them to
uint8 over their calibrated range, a step of 0.73 for dqn LunarLander's Q-values, flipping half its actions), and
the claim's calibration states calibrate the activations (``methods.deploy.target_calibration``).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

from quarl_bench.errors import QuarlError

WEIGHT_ZERO_POINT = 128
WEIGHT_LIMIT = 127  # codes in [-127, 127] before the shift: the claim's symmetric int8 grid
MATRIX_OPS = ("MatMul", "Gemm", "Conv")
WEIGHT_FORMAT = (
    "uint8 codes with zero point 128 on the symmetric int8 grid (codes - 128 in [-127, 127], scale max|w| / 127): "
    "ORT's uint8 x uint8 kernels, exact on every x86 and ARM CPU"
)


def ort_int8(backend: str, fp32: bytes, calibration: np.ndarray | None, method: str, signed: bool = False) -> bytes:
    """ONNX Runtime's int8 graph of ``fp32``: ``ort-int8-dynamic`` or ``ort-int8-static`` (calibrated on
    ``calibration`` with ``method``).

    :param signed: int8 weights, ORT's default layout (for ``verify --emulate``'s tests: it saturates on AVX2).
    """
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_dynamic, quantize_static

    ort.set_default_logger_severity(3)  # the calibration sessions log graph-cleanup notices otherwise
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # "consider pre-processing" notices
    weight_type = QuantType.QInt8 if signed else QuantType.QUInt8
    options = {"WeightSymmetric": True}
    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder) / "fp32.onnx", Path(folder) / "int8.onnx"
        per_channel = backend != "ort-int8-dynamic"
        fp32 = weights_on_grid(fp32, per_channel)
        source.write_bytes(fp32)
        if backend == "ort-int8-dynamic":  # weights times activations only: attention's two activations stay fp32
            excluded = activation_products(fp32)
            quantize_dynamic(source, target, weight_type=weight_type, extra_options=options, nodes_to_exclude=excluded)
        else:
            if calibration is None or not len(calibration):
                raise QuarlError("ort-int8-static needs calibration observations: expected --calibration-states >= 1")
            methods = {
                "minmax": CalibrationMethod.MinMax,
                "entropy": CalibrationMethod.Entropy,
                "percentile": CalibrationMethod.Percentile,
            }
            quantize_static(
                source,
                target,
                observations(calibration),
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                activation_type=QuantType.QUInt8,
                weight_type=weight_type,
                calibrate_method=methods[method],
                nodes_to_exclude=fp32_layers(fp32, calibration),
                extra_options=options,
            )
        model = onnx.load(target)
    source_weights = {i.name: i for i in onnx.load_from_string(fp32).graph.initializer}
    if not signed:
        on_claim_grid(model, source_weights)
    float_decision_values(model)
    return model.SerializeToString()


def activation_products(graph: bytes) -> list[str]:
    """The MatMul nodes with no constant operand (attention's scores and mixing): no torch layer's weight, so the
    claim keeps them fp32 and so does the artifact."""
    import onnx

    model = onnx.load_from_string(graph).graph
    constants = {init.name for init in model.initializer}
    constants |= {out for node in model.node if node.op_type == "Constant" for out in node.output}
    return [n.name for n in model.node if n.op_type == "MatMul" and not constants.intersection(n.input)]


def observations(calibration: np.ndarray):
    """ORT's calibration reader: one observation per batch (its histogram calibrators need equal batches)."""
    from onnxruntime.quantization import CalibrationDataReader

    class Observations(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter(calibration[i : i + 1] for i in range(len(calibration)))

        def get_next(self) -> dict[str, np.ndarray] | None:
            batch = next(self.batches, None)
            return None if batch is None else {"obs": batch}

    return Observations()


def weights_on_grid(fp32: bytes, per_channel: bool) -> bytes:
    """``fp32`` with every matrix op's weight rounded to the claim's symmetric int8 grid (per output channel, or per
    tensor), still as floats: ORT then calibrates the network the claim calibrates (its ranges were 0.1% off
    otherwise), and the first layer it keeps in fp32 computes with the claim's weights."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(fp32)
    initializers = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type not in MATRIX_OPS or len(node.input) < 2 or node.input[1] not in initializers:
            continue
        weight = numpy_helper.to_array(initializers[node.input[1]]).astype(np.float64)
        if weight.ndim < 2:
            continue
        axis = _output_axis(node) if per_channel else None
        step = _grid_step(weight, axis)
        shape = [1] * weight.ndim
        if axis is not None:
            shape[axis] = -1
        rounded = np.clip(np.round(weight / step.reshape(shape)), -WEIGHT_LIMIT, WEIGHT_LIMIT) * step.reshape(shape)
        initializers[node.input[1]].CopyFrom(numpy_helper.from_array(rounded.astype(np.float32), node.input[1]))
    return model.SerializeToString()


def _output_axis(node) -> int:
    """The axis of a matrix op's weight that indexes its output channels."""
    if node.op_type == "Conv":
        return 0
    if node.op_type == "Gemm":
        return 0 if next((a.i for a in node.attribute if a.name == "transB"), 0) else 1
    return 1  # MatMul: [in, out]


def fp32_layers(model: bytes, observations: np.ndarray) -> list[str]:
    """The nodes ``ort-int8-static`` keeps in fp32: the first MatMul/Gemm for vector (non-uint8) observations, and
    for a Dict policy every node before it (its normalisation, the slicing and concatenation of its keys: ORT put
    the normalised observation on a per-tensor uint8 grid there, 58 steps from the claim, whose observation stays
    fp32)."""
    import onnx

    if observations.dtype == np.uint8:
        return []
    nodes = list(onnx.load_from_string(model).graph.node)
    first = next((i for i, node in enumerate(nodes) if node.op_type in MATRIX_OPS), None)
    if first is None:
        return []
    before = nodes[:first]
    keys = [node.name for node in before] if any(node.op_type == "Concat" for node in before) else []
    return [*keys, nodes[first].name]


def on_claim_grid(model, source_weights: dict) -> None:
    """Put every uint8 weight of ``model`` on the claim's symmetric int8 grid, shifted by 128 (ORT's symmetric
    uint8 grid divides by 127.5, a 0.4% coarser step than the claim's), and rescale the int32 biases that were
    quantized with the old step."""
    from onnx import numpy_helper

    initializers = {i.name: i for i in model.graph.initializer}
    axes = {n.input[0]: _axis(n) for n in model.graph.node if n.op_type == "DequantizeLinear"}
    rescaled: dict[str, np.ndarray] = {}
    for name, initializer in initializers.items():
        base = name.removesuffix("_quantized")
        # a Gemm's (out, in) weight, which dynamic quantization turned into a MatMul's (in, out) "_Transposed" one
        source = base if base in source_weights else base.removesuffix("_Transposed")
        if base == name or source not in source_weights or initializer.data_type != 2 or len(initializer.dims) < 2:
            continue  # 2: TensorProto.UINT8
        weight = numpy_helper.to_array(source_weights[source]).astype(np.float64)
        if source != base:
            weight = weight.T
        scale_name = f"{base}_scale"
        old_scale = numpy_helper.to_array(initializers[scale_name]).astype(np.float64)
        axis = axes.get(name, 1) if old_scale.size > 1 else None
        scale = _grid_step(weight, axis)
        shape = [1] * weight.ndim
        if axis is not None:
            shape[axis] = -1
        codes = np.clip(np.round(weight / scale.reshape(shape)), -WEIGHT_LIMIT, WEIGHT_LIMIT) + WEIGHT_ZERO_POINT
        initializer.CopyFrom(numpy_helper.from_array(codes.astype(np.uint8), name))
        initializers[scale_name].CopyFrom(
            numpy_helper.from_array(scale.astype(np.float32).reshape(old_scale.shape), scale_name)
        )
        rescaled[base] = scale.reshape(-1) / old_scale.reshape(-1)
    _rescale_biases(model, initializers, source_weights, rescaled)


def _grid_step(weight: np.ndarray, axis: int | None) -> np.ndarray:
    reduce = None if axis is None else tuple(d for d in range(weight.ndim) if d != axis)
    largest = np.abs(weight).max(axis=reduce)
    return np.where(largest > 0, largest / WEIGHT_LIMIT, 1.0).astype(np.float64).reshape(-1)


def _axis(node) -> int:
    return next((a.i for a in node.attribute if a.name == "axis"), 1)


def _rescale_biases(model, initializers: dict, source_weights: dict, rescaled: dict[str, np.ndarray]) -> None:
    """int32 biases (``B_quantized``, step = input step x weight step) follow their weight's new step."""
    from onnx import numpy_helper

    producer = {o: n for n in model.graph.node for o in n.output}
    for node in model.graph.node:
        if node.op_type not in MATRIX_OPS or len(node.input) < 3:
            continue
        weight_dq, bias_dq = producer.get(node.input[1]), producer.get(node.input[2])
        if weight_dq is None or bias_dq is None or bias_dq.op_type != "DequantizeLinear":
            continue
        base = weight_dq.input[0].removesuffix("_quantized")
        bias_name = bias_dq.input[0]
        if base not in rescaled or bias_name.removesuffix("_quantized") not in source_weights:
            continue
        bias = numpy_helper.to_array(source_weights[bias_name.removesuffix("_quantized")]).astype(np.float64)
        scale_name = bias_dq.input[1]
        step = numpy_helper.to_array(initializers[scale_name]).astype(np.float64) * rescaled[base]
        codes = np.clip(np.round(bias / step), -(2**31), 2**31 - 1).astype(np.int32)
        initializers[bias_name].CopyFrom(numpy_helper.from_array(codes, bias_name))
        initializers[scale_name].CopyFrom(numpy_helper.from_array(step.astype(np.float32), scale_name))


def float_decision_values(model) -> None:
    """Drop the QuantizeLinear -> DequantizeLinear pair ORT puts on the last matrix op's output (and so on an
    ArgMax's input): the claim keeps the decision values in float."""
    nodes = list(model.graph.node)
    last = next((n for n in reversed(nodes) if n.op_type in MATRIX_OPS), None)
    if last is None:
        return
    output = last.output[0]
    for quantize in [n for n in nodes if n.op_type == "QuantizeLinear" and n.input[0] == output]:
        for dequantize in [n for n in nodes if n.op_type == "DequantizeLinear" and n.input[0] == quantize.output[0]]:
            for consumer in model.graph.node:
                consumer.input[:] = [output if i == dequantize.output[0] else i for i in consumer.input]
            for graph_output in model.graph.output:
                if graph_output.name == dequantize.output[0]:
                    graph_output.name = output
            model.graph.node.remove(dequantize)
        model.graph.node.remove(quantize)
    _drop_unused_initializers(model)


def _drop_unused_initializers(model) -> None:
    used = {i for n in model.graph.node for i in n.input}
    for initializer in [i for i in model.graph.initializer if i.name not in used]:
        model.graph.initializer.remove(initializer)


def kernels(model_bytes: bytes) -> dict[str, int]:
    """The ops ONNX Runtime runs the graph with after its optimizations, here (``QGemm``, ``MatMulIntegerToFloat``,
    ``DynamicQuantizeMatMul``: integer kernels; ``Gemm``: float), counted."""
    import onnx
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        optimized = onnx.load(options.optimized_model_filepath)
    counts: dict[str, int] = {}
    for node in optimized.graph.node:
        if node.op_type in (*MATRIX_OPS, *INTEGER_OPS):
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


INTEGER_OPS = (
    "QGemm",
    "QLinearMatMul",
    "QLinearConv",
    "MatMulInteger",
    "ConvInteger",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
)


def weight_types(model_bytes: bytes) -> dict[str, int]:
    """How many weight matrices (initializers of 2+ dimensions) of each dtype the graph holds."""
    import onnx

    counts: dict[str, int] = {}
    for initializer in onnx.load_from_string(model_bytes).graph.initializer:
        if len(initializer.dims) >= 2:
            name = onnx.TensorProto.DataType.Name(initializer.data_type)
            counts[name] = counts.get(name, 0) + 1
    return counts
