"""Compile and run ``c-int8`` sources: on this host through the system C compiler and ``ctypes``, and for a
Cortex-M4 through ``arm-none-eabi-gcc`` (flash and RAM from the ELF) under QEMU with semihosting."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from quarl_bench.errors import QuarlError

HOST_FLAGS = ["-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Werror"]
CORTEX_M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-ffp-contract=off"]
QEMU_BOARD = ("mps2-an386", "cortex-m4")  # ARM's MPS2 board with a Cortex-M4 image (FPU)
STACK_BYTES = 2048  # the size build's stack, counted in its RAM figure
CROSS_TOOLS = ("arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm")
APT_PACKAGES = "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"

LINKER_SCRIPT = """\
MEMORY { FLASH (rx) : ORIGIN = 0x00000000, LENGTH = 4M
         RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 4M }
ENTRY(reset_handler)
SECTIONS {
  .isr_vector : { KEEP(*(.isr_vector)) } > FLASH
  .text : { *(.text*) *(.rodata*) KEEP(*(.init)) KEEP(*(.fini)) . = ALIGN(4); } > FLASH
  .ARM.exidx : { *(.ARM.exidx*) } > FLASH
  .preinit_array : { PROVIDE_HIDDEN(__preinit_array_start = .); KEEP(*(.preinit_array)); PROVIDE_HIDDEN(__preinit_array_end = .); } > FLASH
  .init_array : { PROVIDE_HIDDEN(__init_array_start = .); KEEP(*(SORT(.init_array.*))) KEEP(*(.init_array)); PROVIDE_HIDDEN(__init_array_end = .); } > FLASH
  .fini_array : { PROVIDE_HIDDEN(__fini_array_start = .); KEEP(*(.fini_array)); PROVIDE_HIDDEN(__fini_array_end = .); } > FLASH
  _data_load = LOADADDR(.data);
  .data : { _data_start = .; *(.data*) . = ALIGN(4); _data_end = .; } > RAM AT > FLASH
  .bss (NOLOAD) : { __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(4); __bss_end__ = .; } > RAM
  end = .; PROVIDE(_end = .); PROVIDE(__end__ = .);
  .stack (NOLOAD) : { . = ALIGN(8); . = . + %(stack)d; _stack_top = .; } > RAM
}
"""

STARTUP = """\
#include <stdint.h>
extern uint32_t _data_load, _data_start, _data_end, __bss_start__, __bss_end__, _stack_top;
extern int %(entry)s(void);
void reset_handler(void) {
    uint32_t *from = &_data_load, *to = &_data_start;
    volatile uint32_t *cpacr = (volatile uint32_t *)0xE000ED88u;
    *cpacr |= 0xFu << 20; /* enable the FPU (CP10, CP11) */
    __asm volatile("dsb\\n isb");
    while (to < &_data_end) *to++ = *from++;
    for (to = &__bss_start__; to < &__bss_end__;) *to++ = 0;
    %(entry)s();
    for (;;) {}
}
static void halt(void) { for (;;) {} }
__attribute__((section(".isr_vector"), used)) static const void *vectors[16] = {
    &_stack_top, (void *)reset_handler, (void *)halt, (void *)halt, (void *)halt, (void *)halt, (void *)halt,
};
"""

SIZE_MAIN = """\
#include "policy.h"
static volatile float observation[QUARL_OBS_DIM];
volatile int quarl_sink;
int main(void) {
    float in[QUARL_OBS_DIM], action[QUARL_ACTION_DIM];
    int i;
    for (i = 0; i < QUARL_OBS_DIM; i++) in[i] = observation[i];
    quarl_sink = quarl_policy_act(in, action) + (int)action[0];
    return 0;
}
"""

PLAY_MAIN = """\
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include "policy.h"
#include "observations.h"
int main(void) {
    float action[QUARL_ACTION_DIM];
    int n, j;
    for (n = 0; n < QUARL_RECORDED; n++) {
        int index = quarl_policy_act(QUARL_OBSERVATIONS[n], action);
        printf("%d", index);
        for (j = 0; j < (QUARL_DISCRETE ? 0 : QUARL_ACTION_DIM); j++) {
            uint32_t bits;
            memcpy(&bits, &action[j], 4);
            printf(" %08lx", (unsigned long)bits);
        }
        printf("\\n");
    }
    return 0;
}
"""


def compiler() -> str:
    """The system C compiler (``$CC``, else cc/gcc/clang).

    :raises QuarlError: naming what to install when there is none.
    """
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    raise QuarlError("c-int8 needs a C compiler (none of $CC, cc, gcc, clang found): install gcc")


def host_library(sources: dict[str, bytes], folder: Path) -> Path:
    """``policy.c`` compiled for this host as a shared library in ``folder``."""
    for name, data in sources.items():
        (folder / name).write_bytes(data)
    library = folder / "libpolicy.so"
    _run([compiler(), *HOST_FLAGS, "-shared", "-fPIC", str(folder / "policy.c"), "-o", str(library)], "host build")
    return library


def host_runner(sources: dict[str, bytes], obs_dim: int, action_dim: int, discrete: bool) -> Callable:
    """A function from a batch of raw observations to actions, calling the compiled C through ``ctypes``."""
    folder = tempfile.TemporaryDirectory(prefix="quarl-c-int8-")
    library = ctypes.CDLL(str(host_library(sources, Path(folder.name))))
    act = library.quarl_policy_act
    act.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float)]
    act.restype = ctypes.c_int
    action = (ctypes.c_float * max(action_dim, 1))()

    def run(observations: np.ndarray) -> np.ndarray:
        batch = np.ascontiguousarray(np.asarray(observations, dtype=np.float32).reshape(len(observations), obs_dim))
        out = np.empty(len(batch), np.int64) if discrete else np.empty((len(batch), action_dim), np.float32)
        pointer = ctypes.POINTER(ctypes.c_float)
        for row in range(len(batch)):
            index = act(batch[row].ctypes.data_as(pointer), action)
            if discrete:
                out[row] = index
            else:
                out[row] = np.ctypeslib.as_array(action)[:action_dim]
        return out

    setattr(run, "keep", (folder, library))  # noqa: B010 - the library lives as long as the function
    return run


COUNT_MAIN = """\
#include <stdio.h>
#include <stdint.h>
#include "policy.h"
#include "observations.h"
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
int main(void) {
    float action[QUARL_ACTION_DIM];
    volatile int sink = 0;
    uint32_t start, end;
    int n;
    SYST_RVR = 0xFFFFFFu;
    SYST_CVR = 0;
    SYST_CSR = 5u; /* enabled, processor clock */
    start = SYST_CVR;
    for (n = 0; n < QUARL_RECORDED; n++) sink += quarl_policy_act(QUARL_OBSERVATIONS[n], action);
    end = SYST_CVR;
    printf("%lu\\n", (unsigned long)((start - end) & 0xFFFFFFu));
    return 0;
}
"""
# Under -icount shift=0 QEMU advances its virtual clock 1 ns per instruction, and the MPS2 board's SysTick counts
# its 25 MHz processor clock: one tick per 40 instructions (checked on a loop of 12 known instructions).
INSTRUCTIONS_PER_TICK = 40


def cortex_m4_instructions(sources: dict[str, bytes], observations: np.ndarray, flags: tuple[str, ...] = ()) -> float:
    """Instructions per call of the policy on a Cortex-M4 (-O2), counted by QEMU (``-icount shift=0``) over the
    recorded ``observations`` (at most 16.7M / 40 per call x calls: the 24-bit SysTick), the call loop included."""
    with tempfile.TemporaryDirectory(prefix="quarl-count-") as name:
        folder = Path(name)
        extra = {"observations.h": _observations_header(observations)}
        elf = _cortex_m4_elf({**sources, **extra}, folder, COUNT_MAIN, ["-O2", *flags], ["--specs=rdimon.specs"])
        machine, cpu = QEMU_BOARD
        command = ["qemu-system-arm", "-M", machine, "-cpu", cpu, "-nographic", "-monitor", "none", "-serial"]
        command += ["none", "-semihosting-config", "enable=on,target=native", "-icount", "shift=0", "-kernel", str(elf)]
        ticks = int(_run(command, "QEMU instruction count", timeout=600).stdout.split()[-1])
    return ticks * INSTRUCTIONS_PER_TICK / len(observations)


def cross_tools_missing() -> list[str]:
    return [tool for tool in CROSS_TOOLS if shutil.which(tool) is None]


def cortex_m4_size(sources: dict[str, bytes]) -> dict[str, int]:
    """Flash (text + data) and RAM of the policy linked for a Cortex-M4 with a minimal startup and a main that calls
    it once, at -Os with unused sections dropped (``arm-none-eabi-size``). RAM is split: the static buffers
    (``data`` + ``bss`` less the reserved stack) and the stack its functions use (``-fstack-usage``: the sum of
    every ``policy.c`` frame, a bound on the deepest call chain)."""
    with tempfile.TemporaryDirectory(prefix="quarl-m4-") as name:
        folder = Path(name)
        flags = ["-Os", "-nostdlib", "-nostartfiles", "-fno-tree-loop-distribute-patterns", "-fstack-usage"]
        elf = _cortex_m4_elf(sources, folder, SIZE_MAIN, flags, [])
        text, data, bss = _size(elf)
        stack = sum(_policy_frames(folder).values())
    static = data + bss - STACK_BYTES
    return {
        "flash_bytes": text + data,
        "ram_bytes": static + stack,
        "static_ram_bytes": static,
        "stack_bytes": stack,
        "text": text,
        "data": data,
        "bss": bss - STACK_BYTES,
    }


def _policy_frames(folder: Path) -> dict[str, int]:
    """Each ``policy.c`` function's stack frame in bytes, from GCC's ``.su`` files in ``folder``."""
    frames = {}
    for path in folder.glob("*.su"):
        for line in path.read_text().splitlines():
            where, size, *_ = line.split("\t")
            if "policy.c:" in where:
                frames[where.rsplit(":", 1)[-1]] = int(size)
    return frames


def play_recorded(sources: dict[str, bytes], observations: np.ndarray, target: str) -> list[str]:
    """Each recorded observation's action as text (the index, and each float's bits in hex), from the host build
    (``target`` ``host``) or the Cortex-M4 build under QEMU (``qemu``)."""
    with tempfile.TemporaryDirectory(prefix=f"quarl-{target}-") as name:
        folder = Path(name)
        extra = {"observations.h": _observations_header(observations)}
        if target == "host":
            for file, data in {**sources, **extra, "play.c": PLAY_MAIN.encode()}.items():
                (folder / file).write_bytes(data)
            binary = folder / "play"
            _run([compiler(), *HOST_FLAGS, str(folder / "play.c"), str(folder / "policy.c"), "-o", str(binary)], "host")
            result = _run([str(binary)], "host run")
        else:
            elf = _cortex_m4_elf({**sources, **extra}, folder, PLAY_MAIN, ["-O2"], ["--specs=rdimon.specs"])
            machine, cpu = QEMU_BOARD
            command = ["qemu-system-arm", "-M", machine, "-cpu", cpu, "-nographic", "-monitor", "none", "-serial"]
            command += ["none", "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)]
            result = _run(command, "QEMU run", timeout=600)
    return result.stdout.splitlines()


def _cortex_m4_elf(sources: dict[str, bytes], folder: Path, main: str, flags: list[str], specs: list[str]) -> Path:
    missing = cross_tools_missing()
    if missing:
        raise QuarlError(
            f"the Cortex-M4 build needs {', '.join(missing)}: apt-get install {APT_PACKAGES} "
            "(scripts/bootstrap.sh does when run as root)"
        )
    for file, data in sources.items():
        (folder / file).write_bytes(data)
    (folder / "main.c").write_text(main)
    entry = "_start" if specs else "main"  # newlib's crt0 sets up semihosting, then calls main
    (folder / "startup.c").write_text(STARTUP % {"entry": entry})
    (folder / "link.ld").write_text(LINKER_SCRIPT % {"stack": STACK_BYTES if not specs else 65536})
    elf = folder / "policy.elf"
    command = ["arm-none-eabi-gcc", *CORTEX_M4, "-std=c99", *flags, "-ffunction-sections", "-fdata-sections"]
    command += [*specs, "-T", str(folder / "link.ld"), "-Wl,--gc-sections"]
    command += [str(folder / f) for f in ("startup.c", "main.c", "policy.c")]
    command += ["-o", str(elf)] + (["-lc", "-lrdimon", "-lm"] if specs else ["-lgcc"])
    _run(command, "Cortex-M4 build")
    return elf


def _size(elf: Path) -> tuple[int, int, int]:
    out = _run(["arm-none-eabi-size", "-A", str(elf)], "arm-none-eabi-size").stdout
    sections = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            sections[parts[0]] = int(parts[1])
    flash_only = (".isr_vector", ".text", ".ARM.exidx", ".preinit_array", ".init_array", ".fini_array")
    text = sum(sections.get(name, 0) for name in flash_only)
    return text, sections.get(".data", 0), sections.get(".bss", 0) + sections.get(".stack", 0)


def _observations_header(observations: np.ndarray) -> bytes:
    from quarl_bench.deploy.c_source import c_literal

    rows = np.asarray(observations, dtype=np.float32).reshape(len(observations), -1)
    body = ",\n".join("    {" + ", ".join(c_literal(float(v)) for v in row) + "}" for row in rows)
    text = f"#include <math.h>\n#define QUARL_RECORDED {len(rows)}\nstatic const float QUARL_OBSERVATIONS[{len(rows)}][{rows.shape[1]}] = {{\n{body}\n}};\n"
    return text.encode()


def _run(command: list[str], what: str, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise QuarlError(f"c-int8 {what} failed: {' | '.join(lines[:3]) if lines else f'exit {result.returncode}'}")
    return result
