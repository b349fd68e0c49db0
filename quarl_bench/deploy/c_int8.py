"""``c-int8``: an MLP policy as dependency-free C99, integer arithmetic as CMSIS-NN's ``arm_fully_connected_s8``.

- Weights: per-output-channel symmetric int8 (codes in [-127, 127], step max|w|/127), the W8A8 per-channel
  fake-quant policy's grid.
- Activations: int8, each layer's input on the asymmetric grid of its calibrated min-max range (the fake-quant
  policy's ``--act-bits int8`` grid: same states, same ranges, same zero point), int32 accumulators; the bias is
  added to the requantization product (int64, ``product_bias``), so it is as exact as the fake-quant's float bias.
- Requantization: a Q31 fixed-point multiplier and a shift per output channel, rounding to nearest. ReLU is the
  clamp at the next grid's zero point. Tanh requantizes to an int16 pre-activation and finds the output code among
  255 thresholds (tanh is monotone, so the int8 code of tanh(y) is a step function of y): integers only, so a
  Cortex-M build gives the host's actions bit for bit.
- The last layer is dequantized to float (its scale per channel, its bias in float); the head follows: argmax, the
  quantiles' mean then argmax, clipping to the bounds, or tanh then unscaling (a tanh written with + - * / only).
- Observation normalisation (VecNormalize's mean, scale and clip) happens first, inside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from quarl_bench.deploy.mlp import Dense, Mlp
from quarl_bench.quant.affine import activation_grid_parameters, quant_step

INT16_RANGE = 8.0  # the tanh pre-activation's int16 grid covers at least [-8, 8] (tanh(8) = 1 - 2e-7)
INT16_LIMIT = 32767


@dataclass(frozen=True)
class IntLayer:
    """One dense layer in integers. Hidden layers requantize to the next layer's int8 input (``multiplier``,
    ``shift``; ``thresholds`` for tanh); the last one dequantizes with ``output_scale``."""

    weight: np.ndarray  # int8 (out, in)
    bias: np.ndarray  # int64 on the requantization product's grid (hidden), or float32 (last)
    input_step: float
    input_zero: int  # the int8 code of 0.0
    weight_step: np.ndarray  # float32 (out,)
    activation: str
    multiplier: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    shift: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    output_zero: int = 0
    output_low: int = -128
    thresholds: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    output_scale: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @property
    def last(self) -> bool:
        return len(self.output_scale) > 0


@dataclass(frozen=True)
class IntProgram:
    mlp: Mlp
    layers: tuple[IntLayer, ...]
    weight_bits: int = 8  # 8: one int8 code per byte; 4: two int4 codes per byte (c-int4)

    @property
    def weight_bytes(self) -> int:
        """The weight arrays' bytes (the flash goal's base): int4 rows take ceil(inputs / 2) bytes."""
        return int(
            sum(layer.weight.shape[0] * row_bytes(layer.weight.shape[1], self.weight_bits) for layer in self.layers)
        )

    @property
    def macs(self) -> int:
        """Multiply-accumulates per action."""
        return int(sum(layer.weight.size for layer in self.layers))

    def parameters(self) -> list[dict]:
        """Per layer: shapes, steps and zero points (``policy.json``'s quantization parameters)."""
        limit = code_limit(self.weight_bits)
        return [
            {
                "shape": list(layer.weight.shape),
                "activation": layer.activation,
                "input_step": layer.input_step,
                "input_zero_point": layer.input_zero,
                "weight_step": f"per output channel, symmetric, codes in [-{limit}, {limit}]",
                "output": "float (dequantized)"
                if layer.last
                else (
                    "int16 pre-activation, 255 tanh thresholds" if layer.activation == "tanh" else "int8 requantized"
                ),
            }
            for layer in self.layers
        ]


def fixed_point(multiplier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``multiplier`` as a Q31 integer and a power-of-two shift: m = q * 2**(shift - 31), q in [2**30, 2**31)."""
    quantized, shifts = [], []
    for value in np.asarray(multiplier, dtype=np.float64):
        if value <= 0:
            quantized.append(0)
            shifts.append(0)
            continue
        fraction, exponent = math.frexp(value)
        q = round(fraction * 2**31)
        if q == 2**31:
            q, exponent = q // 2, exponent + 1
        quantized.append(q)
        shifts.append(max(exponent, -31))
    return np.asarray(quantized, np.int64).astype(np.int32), np.asarray(shifts, np.int32)


def input_grid(values: np.ndarray) -> tuple[float, int]:
    """The int8 grid of one layer's input: step and the int8 code of zero (min-max, as ``--act-bits int8``)."""
    tensor = torch.as_tensor(values)
    step, zero = activation_grid_parameters(tensor.min(), tensor.max(), 8)
    return float(step), int(zero) - 128


def row_bytes(inputs: int, bits: int) -> int:
    """Bytes of one output channel's weight codes: one per code at 8 bits, two codes per byte at 4."""
    return inputs if bits == 8 else (inputs + 1) // 2


def code_limit(bits: int) -> int:
    """The symmetric narrow grid's largest code: 127 at 8 bits, 7 at 4 (the fake-quant's --symmetric grid)."""
    return 2 ** (bits - 1) - 1


def quantize_mlp(mlp: Mlp, states: np.ndarray, weight_bits: int = 8) -> IntProgram:
    """The integer program of ``mlp``, its activation ranges calibrated on ``states``: the network's inputs
    (observations after normalisation), the fake-quant policy's calibration states. ``weight_bits``: 8 (c-int8) or
    4 (c-int4: int4 weights per output channel, int8 activations, int32 accumulators, as CMSIS-NN's s4 kernels)."""
    weights = [weight_codes(layer.weight, weight_bits) for layer in mlp.layers]
    # ranges from the network with its weights already on their grids, activations in float: what the fake-quant
    # policy calibrates its activation quantizers on (weights are rounded first, then hooks are calibrated)
    rounded = replace(
        mlp,
        layers=tuple(
            Dense((codes * step[:, None]).astype(np.float32), layer.bias, layer.activation)
            for (codes, step), layer in zip(weights, mlp.layers, strict=True)
        ),
    )
    inputs, pre_activations = rounded.trace(states)
    grids = [input_grid(values) for values in inputs]
    layers = []
    for index, layer in enumerate(mlp.layers):
        codes, step = weights[index]
        input_step, input_zero = grids[index]
        accumulator_step = np.float64(input_step) * step.astype(np.float64)
        if index == len(mlp.layers) - 1:
            layers.append(
                IntLayer(
                    bias=layer.bias.astype(np.float32),
                    activation=layer.activation,
                    output_scale=accumulator_step.astype(np.float32),
                    weight=codes,
                    weight_step=step,
                    input_step=input_step,
                    input_zero=input_zero,
                )
            )
            continue
        output_step, output_zero = grids[index + 1]
        if layer.activation == "tanh":
            reach = max(INT16_RANGE, 1.25 * float(np.abs(pre_activations[index]).max()))
            int16_step = reach / INT16_LIMIT
            multiplier, shift = fixed_point(accumulator_step / int16_step)
            layers.append(
                IntLayer(
                    bias=product_bias(layer.bias, accumulator_step, multiplier),
                    activation="tanh",
                    multiplier=multiplier,
                    shift=shift,
                    output_zero=output_zero,
                    thresholds=tanh_thresholds(int16_step, output_step, output_zero),
                    weight=codes,
                    weight_step=step,
                    input_step=input_step,
                    input_zero=input_zero,
                )
            )
            continue
        multiplier, shift = fixed_point(accumulator_step / output_step)
        layers.append(
            IntLayer(
                bias=product_bias(layer.bias, accumulator_step, multiplier),
                activation=layer.activation,
                multiplier=multiplier,
                shift=shift,
                output_zero=output_zero,
                output_low=output_zero if layer.activation == "relu" else -128,
                weight=codes,
                weight_step=step,
                input_step=input_step,
                input_zero=input_zero,
            )
        )
    return IntProgram(mlp, tuple(layers), weight_bits)


def product_bias(bias: np.ndarray, accumulator_step: np.ndarray, multiplier: np.ndarray) -> np.ndarray:
    """The bias on the grid of the requantization product ``acc * multiplier`` (int64), 2^(31 - shift) times finer
    than the output grid: the fake-quant policy adds its bias in float, and a bias rounded to the accumulator's
    grid (as CMSIS-NN's int32 bias) moved sac Pendulum's actions by up to 4.9 int8 steps on 10k recorded states.

    :raises QuarlError: for a bias too large for int64 on that grid (a degenerate layer).
    """
    from quarl_bench.errors import QuarlError

    exact = np.asarray(bias, np.float64) / accumulator_step * multiplier.astype(np.float64)
    if not np.all(np.abs(exact) < 2.0**62):
        raise QuarlError("c-int8 cannot hold this policy's bias: a bias is over 2^62 requantization units")
    return np.round(exact).astype(np.int64)


def weight_codes(weight: np.ndarray, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel symmetric codes of ``weight`` at ``bits`` and each channel's step (the fake-quant grid's)."""
    tensor = torch.as_tensor(weight)
    step = quant_step(tensor, bits, per_channel=True, symmetric=True).reshape(-1)
    step = torch.where(step > 0, step, torch.ones_like(step)).numpy().astype(np.float32)
    limit = code_limit(bits)
    return np.clip(np.round(weight / step[:, None]), -limit, limit).astype(np.int8), step


def packed_rows(codes: np.ndarray, bits: int) -> np.ndarray:
    """Weight codes as the C stores them: int8 as they are; int4 two per byte, each row padded to whole bytes,
    the even input in the low nibble (CMSIS-NN's s4 order)."""
    if bits == 8:
        return codes.reshape(-1)
    rows, inputs = codes.shape
    padded = np.zeros((rows, 2 * row_bytes(inputs, bits)), np.int16)
    padded[:, :inputs] = codes
    nibbles = padded & 0xF
    return (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8).view(np.int8).reshape(-1)


def tanh_thresholds(int16_step: float, output_step: float, output_zero: int) -> np.ndarray:
    """The 255 int16 pre-activations at which the int8 code of tanh(y) steps up: code -128 + k needs
    y >= atanh((k - 0.5 - output_zero) * output_step), for k = 1 .. 255."""
    found = []
    for k in range(1, 256):
        level = (-128 + k - 0.5 - output_zero) * output_step
        if level <= -1:
            found.append(-INT16_LIMIT)
        elif level >= 1:
            found.append(INT16_LIMIT)
        else:
            found.append(int(np.clip(math.ceil(math.atanh(level) / int16_step), -INT16_LIMIT, INT16_LIMIT)))
    return np.asarray(found, np.int16)
