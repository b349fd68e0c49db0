"""An ORT int8 graph played in numpy with the integer arithmetic of a chosen x86 kernel, so that a machine of one CPU
kind can check what an artifact computes on another (``quarl-bench verify DIR --emulate avx2``).

- ``exact``: int32 sums of products, as VNNI's ``vpdpbusd`` and every uint8 x uint8 kernel compute them.
- ``avx2``: ONNX Runtime's uint8 x int8 kernel on CPUs without VNNI (AVX2, AVX-512 without VNNI): ``vpmaddubsw``
  adds the products of inputs ``k`` and ``k + 1`` into a saturating int16, then ``vpmaddwd`` adds those in int32.
  uint8 x uint8 products go through ``vpmaddwd`` on operands widened to int16 and stay exact.

The graph runs on onnx's reference evaluator; its matrix ops (QDQ ``Gemm``/``MatMul`` on dequantized inputs, and
``MatMulInteger``) are replaced by integer ones that recover the codes from the quantization parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np

KERNELS = ("exact", "avx2")
INT16 = (-32768, 32767)


def integer_products(a: np.ndarray, b: np.ndarray, signed_b: bool, kernel: str) -> np.ndarray:
    """``sum_k a[m, k] * b[k, n]`` over raw uint8 codes ``a`` and raw weight codes ``b`` (int8 where
    ``signed_b``), as ``kernel`` computes it: exactly, or with AVX2's saturating int16 pair sums (u8 x s8 only)."""
    a, b = a.astype(np.int64), b.astype(np.int64)
    if kernel == "exact" or not signed_b:
        return a @ b
    if a.shape[1] % 2:
        a, b = np.pad(a, ((0, 0), (0, 1))), np.pad(b, ((0, 1), (0, 0)))
    products = a[:, :, None] * b[None, :, :]  # (m, k, n)
    pairs = np.clip(products[:, 0::2, :] + products[:, 1::2, :], *INT16)
    return pairs.sum(axis=1)


def emulated(model_bytes: bytes, observations: np.ndarray, kernel: str = "exact") -> np.ndarray:
    """The graph's first output on ``observations``, one observation per call as deployed (a dynamically quantized
    graph takes its ranges from the batch it is given), its int8 matrix products computed as ``kernel``."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}: expected one of {', '.join(KERNELS)}")
    model = onnx.load_from_string(model_bytes)
    for opset in model.opset_import:  # the reference evaluator implements DequantizeLinear from opset 19 on
        if opset.domain in ("", "ai.onnx"):
            opset.version = max(opset.version, 21)
    quantized = _dequantized_tensors(model)
    ops = [_gemm(quantized, kernel), _matmul(quantized, kernel), _matmul_integer(kernel)]
    session = ReferenceEvaluator(model, new_ops=ops)
    name = model.graph.input[0].name
    batch = np.asarray(observations, dtype=np.float32)
    outputs = []
    for i in range(len(batch)):
        found = session.run(None, {name: batch[i : i + 1]})
        assert isinstance(found, list)  # not intermediate: the outputs in order
        outputs.append(np.asarray(found[0]))
    return np.concatenate(outputs)


def _dequantized_tensors(model) -> dict[str, tuple[np.ndarray, np.ndarray, int, bool]]:
    """Each DequantizeLinear output of a uint8/int8 tensor: (scale, zero point, axis, signed)."""
    from onnx import numpy_helper

    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    found = {}
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        scale = values.get(node.input[1])
        zero = values.get(node.input[2]) if len(node.input) > 2 else np.zeros((), np.uint8)
        if scale is None or zero is None or zero.dtype not in (np.uint8, np.int8):
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        found[node.output[0]] = (scale.astype(np.float64), zero.astype(np.int64), axis, zero.dtype == np.int8)
    return found


def _codes(x: np.ndarray, params: tuple[np.ndarray, np.ndarray, int, bool], weight_axis: int | None) -> np.ndarray:
    """The integer codes a dequantized tensor came from."""
    scale, zero, axis, _ = params
    if scale.size > 1:
        shape = [1] * x.ndim
        shape[axis] = -1
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return np.round(x / scale).astype(np.int64) + zero


def _matrix_product(a, b, names, quantized, kernel) -> np.ndarray | None:
    """``a @ b`` (b: [k, n]) in integers where both inputs come out of DequantizeLinear, else None."""
    if names[0] not in quantized or names[1] not in quantized:
        return None
    a_params, b_params = quantized[names[0]], quantized[names[1]]
    a_codes, b_codes = _codes(a, a_params, None), _codes(b, b_params, None)
    a_zero, b_zero = a_params[1], b_params[1]
    sums = integer_products(a_codes, b_codes, b_params[3], kernel)  # raw codes: zero points corrected after
    k = a.shape[1]
    b_zero_n = np.broadcast_to(b_zero.reshape(-1), (b.shape[1],)) if b_zero.size > 1 else b_zero
    exact = sums - a_zero * b_codes.sum(axis=0) - a_codes.sum(axis=1, keepdims=True) * b_zero_n + k * a_zero * b_zero_n
    a_scale = a_params[0]
    b_scale = b_params[0].reshape(-1) if b_params[0].size > 1 else b_params[0]
    return (exact * a_scale * b_scale).astype(np.float32)


def _gemm(quantized: dict, kernel: str) -> Any:
    from onnx.reference.op_run import OpRun

    class Gemm(OpRun):
        op_domain = ""

        def _run(self, a, b, c=None, alpha=None, beta=None, transA=None, transB=None):  # noqa: N803 (ONNX's names)
            a2 = a.T if transA else a
            b2 = b.T if transB else b
            names = list(self.onnx_node.input)
            product = None
            if not transA:
                product = _matrix_product(a2, b2, names, _transposed(quantized, names[1], bool(transB)), kernel)
            if product is None:
                product = a2 @ b2
            y = (alpha if alpha is not None else 1.0) * product
            if c is not None:
                y = y + (beta if beta is not None else 1.0) * c
            return (y.astype(a.dtype),)

    return Gemm


def _transposed(quantized: dict, weight: str, transposed: bool) -> dict:
    """``quantized`` with a transposed weight's channel axis moved to the product's ``n`` axis."""
    if not transposed or weight not in quantized:
        return quantized
    scale, zero, axis, signed = quantized[weight]
    return {**quantized, weight: (scale, zero, 1 - axis, signed)}


def _matmul(quantized: dict, kernel: str) -> Any:
    from onnx.reference.op_run import OpRun

    class MatMul(OpRun):
        op_domain = ""

        def _run(self, a, b):
            names = list(self.onnx_node.input)
            product = _matrix_product(a, b, names, quantized, kernel) if a.ndim == 2 and b.ndim == 2 else None
            return ((a @ b) if product is None else product.astype(a.dtype),)

    return MatMul


def _matmul_integer(kernel: str) -> Any:
    from onnx.reference.op_run import OpRun

    class MatMulInteger(OpRun):
        op_domain = ""

        def _run(self, a, b, a_zero_point=None, b_zero_point=None):
            a_zero = np.int64(0) if a_zero_point is None else a_zero_point.astype(np.int64)
            b_zero = np.int64(0) if b_zero_point is None else b_zero_point.astype(np.int64)
            a2, b2 = a.reshape(-1, a.shape[-1]).astype(np.int64), b.astype(np.int64)
            sums = integer_products(a2, b2, b.dtype == np.int8, kernel)
            k = a2.shape[1]
            exact = sums - a_zero * b2.sum(axis=0) - a2.sum(axis=1, keepdims=True) * b_zero + k * a_zero * b_zero
            return (exact.reshape(*a.shape[:-1], b.shape[-1]).astype(np.int32),)

    return MatMulInteger
