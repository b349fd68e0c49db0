"""The text of ``policy.h`` and ``policy.c`` for a ``c-int8`` :class:`~quarl_bench.deploy.c_int8.IntProgram`."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

from quarl_bench.deploy.c_int8 import IntLayer, IntProgram, packed_rows, row_bytes
from quarl_bench.errors import QuarlError

# 2: exact bias, a status for non-finite observations, extern "C", symbol prefix; 3: c-int4's DSP path
GENERATOR_VERSION = 3
BUILD_FLAGS = "-std=c99 -ffp-contract=off"  # bit-exactness needs both: no FMA contraction, no GNU extensions

HEADER = """\
/* {title}
 * Written by quarl-bench ({backend}, generator version {version}): C99, no dependencies, integer arithmetic as
 * CMSIS-NN's {kernel}, the bias added exactly on the requantization grid.
 * policy.c sha256: {source_hash}
 * Build with: {flags} (the bit-exactness claim needs them; GCC's default -std=gnu11 contracts
 * a * b + c into FMAs and changes actions).
 *
 * int {function}(const float *observation, float *action):
 *   observation: {macro}_OBS_DIM raw floats, as the env gives them{normalised}.
 *   Returns a negative status (-1) and writes no action when an observation value is NaN or infinite; finite
 *   values beyond the calibrated range saturate (see policy.json's observation ranges).
 *   Discrete: returns the action index (and writes it to action[0] when action is not NULL).
 *   Box: writes {macro}_ACTION_DIM floats, already clipped and unscaled to the bounds, and returns 0.
 *   Not reentrant: it works in static buffers, so call it from one thread (or guard it). Two policies link into
 *   one image when each is exported with its own --c-prefix.
 */
#ifndef {macro}_POLICY_H
#define {macro}_POLICY_H
#ifdef __cplusplus
extern "C" {{
#endif
#define {macro}_OBS_DIM {obs_dim}
#define {macro}_ACTION_DIM {action_dim}
#define {macro}_DISCRETE {discrete}
#define {macro}_GENERATOR_VERSION {version}
#define {macro}_STATUS_NONFINITE_OBSERVATION (-1)
int {function}(const float *observation, float *action);
#ifdef __cplusplus
}}
#endif
#endif
"""


@dataclass(frozen=True)
class CNames:
    """The artifact's public names: ``{prefix}_act`` and ``{PREFIX}_*`` macros; no prefix keeps
    ``quarl_policy_act`` and ``QUARL_*``. Everything else in policy.c is ``static``."""

    prefix: str = ""

    def __post_init__(self) -> None:
        if self.prefix and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.prefix):
            raise QuarlError(
                f"bad --c-prefix {self.prefix!r}: expected a C identifier (letters, digits, '_'; not starting with a "
                "digit)"
            )

    @property
    def function(self) -> str:
        return f"{self.prefix}_act" if self.prefix else "quarl_policy_act"

    @property
    def macro(self) -> str:
        return self.prefix.upper() if self.prefix else "QUARL"


RUNTIME = r"""
/* round half to even, as torch.round; v is clamped well inside int32 first */
static int32_t round_even(float v) {
    int32_t t;
    float fraction;
    if (v > 1.0e6f) v = 1.0e6f;
    if (v < -1.0e6f) v = -1.0e6f;
    t = (int32_t)v;
    fraction = v - (float)t;
    if (fraction > 0.5f || (fraction == 0.5f && (t & 1))) return t + 1;
    if (fraction < -0.5f || (fraction == -0.5f && (t & 1))) return t - 1;
    return t;
}

static int32_t clamp32(int32_t v, int32_t low, int32_t high) { return v < low ? low : (v > high ? high : v); }

/* sum over i of w[i] * (in[i] - zero); on a core with the DSP extension (Cortex-M4/M7/M33: __ARM_FEATURE_DSP)
 * four at a time as CMSIS-NN's s8 kernels do: bytes widened to int16 pairs (SXTB16), the zero point subtracted in
 * both halves (SADD16), two dual 16-bit MACs (SMLAD). Integer arithmetic both ways: the same bits. Define
 * QUARL_NO_DSP to build the plain loop. */
static int32_t dot_row(const int8_t *w, const int8_t *in, int n, int32_t zero) {
    int32_t acc = 0;
    int i = 0;
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(QUARL_NO_DSP)
    const uint32_t minus_zero = ((uint32_t)(uint16_t)(int16_t)(-zero)) * 0x00010001u;
    for (; i + 4 <= n; i += 4) {
        uint32_t wq, xq, w02, w13, x02, x13;
        __builtin_memcpy(&wq, w + i, 4);
        __builtin_memcpy(&xq, in + i, 4);
        w02 = __sxtb16(wq);
        w13 = __sxtb16((wq >> 8) | (wq << 24)); /* ROR 8: bytes 1 and 3 */
        x02 = __sadd16(__sxtb16(xq), minus_zero);
        x13 = __sadd16(__sxtb16((xq >> 8) | (xq << 24)), minus_zero);
        acc = (int32_t)__smlad(w02, x02, (int32_t)acc);
        acc = (int32_t)__smlad(w13, x13, (int32_t)acc);
    }
#endif
    for (; i < n; i++) acc += (int32_t)w[i] * ((int32_t)in[i] - zero);
    return acc;
}
"""

# c-int4's dot product: the weights two int4 codes per byte, the even input in the low nibble (CMSIS-NN's s4
# order), sign-extended with masks (no shift of a negative value); integers only, the same bits everywhere. With the
# DSP extension, four inputs at a time: the two bytes' low nibbles (codes 0 and 2) and high nibbles (1 and 3) spread
# into int16 halves and sign-extended there (x ^ 8 - 8 per half: SSUB16), then two SMLADs as in c-int8's loop
INT4_DOT = r"""
static int32_t dot_row(const int8_t *w, const int8_t *in, int n, int32_t zero) {
    int32_t acc = 0, byte;
    int i = 0;
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(QUARL_NO_DSP)
    const uint32_t minus_zero = ((uint32_t)(uint16_t)(int16_t)(-zero)) * 0x00010001u;
    for (; i + 4 <= n; i += 4) {
        uint32_t wq = (uint32_t)(uint8_t)w[i >> 1] | ((uint32_t)(uint8_t)w[(i >> 1) + 1] << 8), xq, x02, x13;
        uint32_t w02 = (wq & 0x000Fu) | ((wq & 0x0F00u) << 8);
        uint32_t w13 = ((wq >> 4) & 0x000Fu) | (((wq >> 4) & 0x0F00u) << 8);
        w02 = __ssub16(w02 ^ 0x00080008u, 0x00080008u);
        w13 = __ssub16(w13 ^ 0x00080008u, 0x00080008u);
        __builtin_memcpy(&xq, in + i, 4);
        x02 = __sadd16(__sxtb16(xq), minus_zero);
        x13 = __sadd16(__sxtb16((xq >> 8) | (xq << 24)), minus_zero);
        acc = (int32_t)__smlad(w02, x02, (int32_t)acc);
        acc = (int32_t)__smlad(w13, x13, (int32_t)acc);
    }
#endif
    for (; i + 1 < n; i += 2) { /* one byte: two codes, two MACs */
        byte = (int32_t)(uint8_t)w[i >> 1];
        acc += ((byte & 0xF) - ((byte & 0x8) << 1)) * ((int32_t)in[i] - zero);
        acc += (((byte >> 4) & 0xF) - ((byte & 0x80) >> 3)) * ((int32_t)in[i + 1] - zero);
    }
    if (i < n) { /* an odd input count: the last code sits alone in the low nibble */
        byte = (int32_t)(uint8_t)w[i >> 1];
        acc += ((byte & 0xF) - ((byte & 0x8) << 1)) * ((int32_t)in[i] - zero);
    }
    return acc;
}
"""

# the hidden layers' kernels: left out of a policy with none (-Werror: unused static functions)
HIDDEN_RUNTIME = r"""
typedef struct {
    int in, out;
    const int8_t *weight;
    const int64_t *bias; /* on the product's grid: acc * multiplier + bias */
    const int32_t *multiplier;
    const int8_t *shift;
    int32_t input_zero, output_zero, output_low;
    const int16_t *thresholds; /* tanh only */
} quarl_layer;

/* (acc * multiplier + bias) * 2^(shift - 31), rounded to nearest (ties up) */
static int32_t requantize(int32_t acc, int64_t bias, int32_t multiplier, int32_t shift) {
    int64_t product = (int64_t)acc * (int64_t)multiplier + bias;
    int32_t right = 31 - shift;
    if (right <= 0) return (int32_t)(product * ((int64_t)1 << (-right)));
    if (right > 62) return 0;
    return (int32_t)((product + ((int64_t)1 << (right - 1))) >> right);
}

static int32_t dot(const quarl_layer *layer, const int8_t *in, int row) {
    return dot_row(layer->weight + (long)row * ROW_BYTES(layer->in), in, layer->in, layer->input_zero);
}

static void hidden(const quarl_layer *layer, const int8_t *in, int8_t *out) {
    int row;
    for (row = 0; row < layer->out; row++) {
        int32_t value = requantize(dot(layer, in, row), layer->bias[row], layer->multiplier[row], layer->shift[row]);
        if (layer->thresholds) { /* tanh: the code is how many thresholds the int16 pre-activation reaches */
            int32_t low = 0, high = 255;
            value = clamp32(value, -32767, 32766);
            while (low < high) {
                int32_t middle = (low + high) / 2;
                if (value >= layer->thresholds[middle]) low = middle + 1; else high = middle;
            }
            out[row] = (int8_t)(-128 + low);
        } else {
            out[row] = (int8_t)clamp32(value + layer->output_zero, layer->output_low, 127);
        }
    }
}
"""

FLOAT_TANH = r"""
/* e^x with + - * / only (Cody-Waite reduction, degree-7 polynomial): the same bits on every IEEE float32 target */
static float quarl_exp(float x) {
    union { float f; uint32_t u; } scale;
    float r, p;
    int32_t n;
    if (x > 88.0f) x = 88.0f;
    if (x < -87.0f) return 0.0f;
    n = round_even(x * 1.44269504f);
    r = x - (float)n * 0.693145752f - (float)n * 1.42860677e-6f;
    p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f
        + r * (0.00138888892f + r * 0.000198412701f))))));
    scale.u = (uint32_t)(n + 127) << 23;
    return p * scale.f;
}

static float quarl_tanh(float x) {
    float e;
    if (x > 9.0f) return 1.0f;
    if (x < -9.0f) return -1.0f;
    if (x > -0.0004f && x < 0.0004f) return x;
    e = quarl_exp(2.0f * x);
    return (e - 1.0f) / (e + 1.0f);
}
"""


def header(program: IntProgram, title: str, source_text: str, names: CNames = CNames()) -> str:
    """``policy.h``: the entry point, its dimensions, its status, the build flags and ``policy.c``'s hash."""
    mlp = program.mlp
    discrete = mlp.head in ("argmax", "quantile-argmax")
    return HEADER.format(
        title=title,
        backend=f"c-int{program.weight_bits}",
        kernel="arm_fully_connected_s8" if program.weight_bits == 8 else "arm_fully_connected_s4 (int4 weights)",
        version=GENERATOR_VERSION,
        source_hash=hashlib.sha256(source_text.encode()).hexdigest(),
        flags=BUILD_FLAGS,
        function=names.function,
        macro=names.macro,
        normalised="; VecNormalize's statistics are applied inside" if mlp.normalized else "",
        obs_dim=mlp.obs_dim,
        action_dim=mlp.action_dim,
        discrete=int(discrete),
    )


def source(program: IntProgram, names: CNames = CNames()) -> str:
    """``policy.c``: the tables, the integer kernels and the entry point."""
    mlp = program.mlp
    # both buffers hold any layer's input or output: the observation's codes may be wider than every hidden layer
    width = max([mlp.obs_dim, *(max(layer.weight.shape) for layer in program.layers[:-1])])
    hidden_layers = len(program.layers) - 1
    lines = ["#include <stdint.h>", "#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && !defined(QUARL_NO_DSP)"]
    bits = program.weight_bits
    runtime = RUNTIME if bits == 8 else RUNTIME[: RUNTIME.index("/* sum over i")] + INT4_DOT
    stride = "#define ROW_BYTES(n) (n)" if bits == 8 else "#define ROW_BYTES(n) (((n) + 1) / 2) /* two codes a byte */"
    lines += ["#include <arm_acle.h>", "#endif", '#include "policy.h"', stride, runtime] + (
        [HIDDEN_RUNTIME] if hidden_layers else []
    )
    if ("tanh",) in program.mlp.final:
        lines.append(FLOAT_TANH)
    lines += [_floats("INPUT_STEP", [program.layers[0].input_step])]
    if mlp.normalized:
        lines += [_floats("OBS_MEAN", mlp.obs_mean), _floats("OBS_SCALE", mlp.obs_scale)]
        lines += [_floats("OBS_CLIP", [mlp.clip_obs])]
    if mlp.head in ("clip", "unscale"):
        assert mlp.low is not None and mlp.high is not None  # a continuous head has its bounds
        lines += [_floats("ACTION_LOW", mlp.low.reshape(-1)), _floats("ACTION_HIGH", mlp.high.reshape(-1))]
    for index, layer in enumerate(program.layers):
        lines += _layer_tables(index, layer, bits)
    for number, op in enumerate(mlp.final):  # per-output scales and offsets after the last layer
        if op[0] in ("scale", "offset") and len(op[1]) > 1:
            lines.append(_floats(f"{op[0].upper()}_{number}", op[1]))
    last = program.layers[-1]
    outputs = last.weight.shape[0]
    lines.append(f"static int8_t buffer_a[{width}]" + (f", buffer_b[{width}];" if hidden_layers else ";"))
    lines.append(f"static float scores[{outputs}];")
    lines.append("")
    lines.append(f"int {names.function}(const float *observation, float *action) {{")
    lines.append("    int8_t *in = buffer_a" + (", *out = buffer_b, *swap;" if hidden_layers else ";"))
    lines.append("    int i, row;")
    lines.append(f"    for (i = 0; i < {names.macro}_OBS_DIM; i++) {{")
    lines.append("        /* NaN and +-inf fail both comparisons: refuse them before anything is written */")
    lines.append("        if (!(observation[i] >= -3.40282347e38f && observation[i] <= 3.40282347e38f)) {")
    lines.append(f"            return {names.macro}_STATUS_NONFINITE_OBSERVATION;")
    lines.append("        }")
    lines.append("    }")
    lines.append(f"    for (i = 0; i < {names.macro}_OBS_DIM; i++) {{")
    lines.append("        float x = observation[i];")
    if mlp.normalized:
        lines.append("        x = (x - OBS_MEAN[i]) * OBS_SCALE[i];")
        lines.append("        x = x < -OBS_CLIP[0] ? -OBS_CLIP[0] : (x > OBS_CLIP[0] ? OBS_CLIP[0] : x);")
    zero = program.layers[0].input_zero
    lines.append(f"        in[i] = (int8_t)(clamp32(round_even(x / INPUT_STEP[0]) + {zero + 128}, 0, 255) - 128);")
    lines.append("    }")
    for index in range(hidden_layers):
        lines.append(f"    hidden(&LAYER_{index}, in, out);")
        lines.append("    swap = in; in = out; out = swap;")
    lines += _last_layer(program, hidden_layers, names)
    lines += _head(program, names)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _layer_tables(index: int, layer: IntLayer, bits: int) -> list[str]:
    out, inputs = layer.weight.shape
    lines = [_ints(f"W{index}", "int8_t", packed_rows(layer.weight, bits), 32)]
    if layer.last:
        lines += [_floats(f"B{index}", layer.bias), _floats(f"SCALE{index}", layer.output_scale)]
        return lines
    lines += [_ints(f"B{index}", "int64_t", layer.bias), _ints(f"M{index}", "int32_t", layer.multiplier)]
    lines.append(_ints(f"S{index}", "int8_t", layer.shift))
    thresholds = "0"
    if layer.activation == "tanh":
        lines.append(_ints(f"T{index}", "int16_t", layer.thresholds, 16))
        thresholds = f"T{index}"
    lines.append(
        f"static const quarl_layer LAYER_{index} = {{{inputs}, {out}, W{index}, B{index}, M{index}, S{index}, "
        f"{layer.input_zero}, {layer.output_zero}, {layer.output_low}, {thresholds}}};"
    )
    return lines


def _last_layer(program: IntProgram, index: int, names: CNames) -> list[str]:
    layer = program.layers[index]
    out, inputs = layer.weight.shape
    lines = [f"    for (row = 0; row < {out}; row++) {{"]
    stride = row_bytes(inputs, program.weight_bits)
    lines.append(f"        int32_t acc = dot_row(W{index} + (long)row * {stride}, in, {inputs}, {layer.input_zero});")
    lines.append(f"        float value = (float)acc * SCALE{index}[row] + B{index}[row];")
    for number, op in enumerate(program.mlp.final):
        if op[0] == "tanh":
            lines.append("        value = quarl_tanh(value);")
        elif op[0] == "relu":
            lines.append("        value = value > 0.0f ? value : 0.0f;")
        elif op[0] in ("scale", "offset"):
            sign = "*" if op[0] == "scale" else "+"
            operand = c_float(op[1][0]) if len(op[1]) == 1 else f"{op[0].upper()}_{number}[row]"
            lines.append(f"        value = value {sign} {operand};")
        else:  # clamp; an infinite bound is no bound
            if op[1] != float("-inf"):
                lines.append(f"        value = value < {c_float(op[1])} ? {c_float(op[1])} : value;")
            if op[2] != float("inf"):
                lines.append(f"        value = value > {c_float(op[2])} ? {c_float(op[2])} : value;")
    value = "value"
    lines.append(f"        scores[row] = {value};")
    lines.append("    }")
    if index:
        lines.append("    (void)out;")
    return lines


def _head(program: IntProgram, names: CNames) -> list[str]:
    mlp = program.mlp
    last = program.layers[-1].weight.shape[0]
    if mlp.head in ("argmax", "quantile-argmax"):
        actions = last // mlp.quantiles
        lines = ["    {", "        int best = 0;", "        float best_value = 0.0f;"]
        lines.append(f"        for (row = 0; row < {actions}; row++) {{")
        if mlp.head == "quantile-argmax":
            lines.append("            float value = 0.0f;")
            lines.append(f"            for (i = 0; i < {mlp.quantiles}; i++) value += scores[i * {actions} + row];")
            lines.append(f"            value /= {mlp.quantiles}.0f;")
        else:
            lines.append("            float value = scores[row];")
        lines.append("            if (row == 0 || value > best_value) { best = row; best_value = value; }")
        lines.append("        }")
        lines.append("        if (action) action[0] = (float)best;")
        lines.append("        return best;")
        lines.append("    }")
        return lines
    lines = [f"    for (row = 0; row < {names.macro}_ACTION_DIM; row++) {{", "        float a = scores[row];"]
    if mlp.head == "clip":
        lines.append(
            "        a = a < ACTION_LOW[row] ? ACTION_LOW[row] : (a > ACTION_HIGH[row] ? ACTION_HIGH[row] : a);"
        )
    else:
        lines.append("        a = ACTION_LOW[row] + 0.5f * (a + 1.0f) * (ACTION_HIGH[row] - ACTION_LOW[row]);")
    lines += ["        action[row] = a;", "    }", "    return 0;"]
    return lines


def _floats(name: str, values) -> str:
    items = ", ".join(c_float(float(v)) for v in np.asarray(values, dtype=np.float32).reshape(-1))
    return f"static const float {name}[] = {{{items}}};"


def c_float(value: float) -> str:
    """``value`` as an exact C99 float literal (hexadecimal)."""
    text = float(np.float32(value)).hex()  # exact: C99 hexadecimal float literal
    return text + "f" if "p" in text else text + "p+0f"


def c_literal(value: float) -> str:
    """A float as C99 source: NaN and infinities as ``math.h``'s ``NAN`` and ``INFINITY``, others exactly."""
    if value != value:
        return "NAN"
    if abs(value) == float("inf"):
        return "INFINITY" if value > 0 else "-INFINITY"
    return c_float(value)


def _ints(name: str, ctype: str, values, per_line: int = 16) -> str:
    flat = [int(v) for v in np.asarray(values).reshape(-1)]
    if ctype == "int32_t":
        items = [f"{v}" if v != -(2**31) else "(-2147483647 - 1)" for v in flat]
    elif ctype == "int64_t":
        items = [f"INT64_C({v})" for v in flat]
    else:
        items = [str(v) for v in flat]
    rows = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return f"static const {ctype} {name}[] = {{\n    " + ",\n    ".join(rows) + "\n};"
