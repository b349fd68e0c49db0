"""What a firmware engineer gets beside ``policy.h`` and ``policy.c``: test vectors (recorded observations with the
host build's output bits, and non-finite ones with their status), a check program, a ``Makefile`` (``make check``
on the host, ``make m4`` on a Cortex-M4 under QEMU), and the facts ``policy.json`` states about the C (names,
build flags, the observation ranges where inputs saturate)."""

from __future__ import annotations

from typing import Any

import numpy as np

from quarl_bench.deploy.c_build import CORTEX_M4, LINKER_SCRIPT, QEMU_BOARD, STARTUP, play_recorded
from quarl_bench.deploy.c_source import BUILD_FLAGS, GENERATOR_VERSION, CNames, c_literal

VECTORS = 256  # recorded observations in the test vectors (the parity gate's fixed states, first ones)
# adversarial rows appended to the recorded ones: (value, in which observation slot); NaN and inf expect status -1
ADVERSARIAL = (float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 3.4e38, -3.4e38)
M4_STACK = 65536  # the check program's stack under QEMU (printf through semihosting)

CHECK = r"""/* Runs the test vectors through {function} and compares every output bit; exit status 0 when all match.
 * Written by quarl-bench (c-int8, generator version {version}). */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include "policy.h"
#include "vectors.h"

int main(void) {{
    float action[{macro}_ACTION_DIM > 0 ? {macro}_ACTION_DIM : 1];
    int n, j, mismatches = 0;
    for (n = 0; n < QUARL_VECTORS; n++) {{
        int status;
        for (j = 0; j < (int)(sizeof action / sizeof action[0]); j++) action[j] = -12345.0f;
        status = {function}(QUARL_VECTOR_OBSERVATIONS[n], action);
        if (status != QUARL_VECTOR_STATUS[n]) mismatches++;
        else if (!{macro}_DISCRETE && status >= 0) {{
            for (j = 0; j < {macro}_ACTION_DIM; j++) {{
                uint32_t bits;
                memcpy(&bits, &action[j], 4);
                if (bits != QUARL_VECTOR_ACTION_BITS[n][j]) {{ mismatches++; break; }}
            }}
        }}
    }}
    printf("%d vectors, %d mismatches\n", QUARL_VECTORS, mismatches);
    return mismatches != 0;
}}
"""

MAKEFILE = """\
# Build and check this policy (quarl-bench c-int8, generator version {version}).
#   make check   host build, runs the test vectors (exit status 0 when every output bit matches)
#   make m4      the same check built for a Cortex-M4 and run under QEMU ({board})
# The bit-exactness claim needs {flags}: keep them in your firmware's build.
CC ?= cc
CFLAGS = {flags} -O2 -Wall -Wextra
M4_CC = arm-none-eabi-gcc
M4_FLAGS = {m4_flags} {flags} -O2

check: check_host
\t./check_host

check_host: check.c policy.c policy.h vectors.h
\t$(CC) $(CFLAGS) check.c policy.c -o check_host

m4: check_m4.elf
\tqemu-system-arm -M {machine} -cpu {cpu} -nographic -monitor none -serial none \\
\t\t-semihosting-config enable=on,target=native -kernel check_m4.elf | tee check_m4.out
\tgrep -q " 0 mismatches" check_m4.out

check_m4.elf: check.c policy.c policy.h vectors.h m4_startup.c m4_link.ld
\t$(M4_CC) $(M4_FLAGS) --specs=rdimon.specs -T m4_link.ld m4_startup.c check.c policy.c -o check_m4.elf \\
\t\t-lc -lrdimon -lm

clean:
\trm -f check_host check_m4.elf check_m4.out

.PHONY: check m4 clean
"""


def test_vectors(observations: np.ndarray, obs_dim: int) -> np.ndarray:
    """The recorded observations (at most :data:`VECTORS`) and, per adversarial value, one row with it in the
    first slot of the first recorded observation."""
    recorded = np.asarray(observations, np.float32).reshape(-1, obs_dim)[:VECTORS]
    adversarial = np.repeat(recorded[:1], len(ADVERSARIAL), axis=0)
    adversarial[:, 0] = np.asarray(ADVERSARIAL, np.float32)
    return np.concatenate([recorded, adversarial])


def vectors_header(sources: dict[str, bytes], vectors: np.ndarray, action_dim: int) -> str:
    """``vectors.h``: each vector's observation, the status and output bits the host build gave (the C, built with
    the flags it needs, is its own reference: a target must reproduce it bit for bit)."""
    lines = play_recorded(sources, vectors, "host")
    statuses, bits = [], []
    for line in lines:
        parts = line.split()
        statuses.append(int(parts[0]))
        bits.append([int(word, 16) for word in parts[1:]] or [0])
    width = max(action_dim, 1)
    observations = ",\n".join("    {" + ", ".join(c_literal(float(v)) for v in row) + "}" for row in vectors)
    actions = ",\n".join("    {" + ", ".join(f"0x{b:08x}u" for b in (row + [0] * width)[:width]) + "}" for row in bits)
    return (
        f"/* {len(vectors)} test vectors: recorded observations, then NaN, +-inf and huge values (status -1 for the "
        "non-finite ones). */\n"
        "#include <math.h>\n"
        f"#define QUARL_VECTORS {len(vectors)}\n"
        f"static const float QUARL_VECTOR_OBSERVATIONS[{len(vectors)}][{vectors.shape[1]}] = {{\n{observations}\n}};\n"
        f"static const int QUARL_VECTOR_STATUS[{len(vectors)}] = {{{', '.join(map(str, statuses))}}};\n"
        f"static const uint32_t QUARL_VECTOR_ACTION_BITS[{len(vectors)}][{width}] = {{\n{actions}\n}};\n"
    )


def firmware_files(sources: dict[str, bytes], vectors: np.ndarray, program: Any, names: CNames) -> dict[str, bytes]:
    """The check program, the test vectors (:func:`test_vectors`), the Makefile and the Cortex-M4 startup and
    linker script.

    :param sources: ``policy.h`` and ``policy.c`` with the default names (the host reference run uses them).
    """
    mlp = program.mlp
    machine, cpu = QEMU_BOARD
    m4_flags = " ".join(flag for flag in CORTEX_M4 if flag != "-ffp-contract=off")
    return {
        "vectors.h": vectors_header(sources, vectors, mlp.action_dim).encode(),
        "check.c": CHECK.format(function=names.function, macro=names.macro, version=GENERATOR_VERSION).encode(),
        "Makefile": MAKEFILE.format(
            version=GENERATOR_VERSION,
            flags=BUILD_FLAGS,
            m4_flags=m4_flags,
            board=f"{machine}, {cpu}",
            machine=machine,
            cpu=cpu,
        ).encode(),
        "m4_startup.c": (STARTUP % {"entry": "_start"}).encode(),
        "m4_link.ld": (LINKER_SCRIPT % {"stack": M4_STACK}).encode(),
    }


def saturation_ranges(program: Any) -> list[list[float]]:
    """Per observation feature, the raw values beyond which the int8 input saturates (VecNormalize's clip
    included): [low, high] in the env's own units."""
    mlp, first = program.mlp, program.layers[0]
    low = (-128 - first.input_zero) * first.input_step
    high = (127 - first.input_zero) * first.input_step
    lows, highs = np.full(mlp.obs_dim, low), np.full(mlp.obs_dim, high)
    if mlp.normalized:
        lows, highs = np.maximum(lows, -mlp.clip_obs), np.minimum(highs, mlp.clip_obs)
        lows = lows / mlp.obs_scale + mlp.obs_mean
        highs = highs / mlp.obs_scale + mlp.obs_mean
    return [[float(a), float(b)] for a, b in zip(lows, highs, strict=True)]


def c_contract(program: Any, names: CNames, vectors: int) -> dict[str, Any]:
    """``policy.json``'s ``c`` block: names, version, flags, status codes, vectors and saturation ranges."""
    return {
        "function": names.function,
        "macro_prefix": names.macro,
        "generator_version": GENERATOR_VERSION,
        "required_flags": BUILD_FLAGS,
        "status": {"nonfinite_observation": -1, "meaning": "NaN or +-inf in the observation: no action written"},
        "reentrant": False,
        "single_instance": "static buffers: call from one thread, or guard the call",
        "test_vectors": vectors,
        "observation_saturation": saturation_ranges(program),
        "observation_saturation_units": "the env's own units, per feature (policy.json's observation.features)",
    }
