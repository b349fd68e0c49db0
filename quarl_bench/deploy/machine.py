"""Which machine a number was measured on: the CPU's int8 features, its kind, and the runtimes' versions.

int8 kernels differ by CPU: ONNX Runtime multiplies uint8 x int8 with ``vpdpbusd`` on VNNI CPUs and with the
saturating ``vpmaddubsw`` on AVX2 ones; XNNPACK and LiteRT pick their own. So every timing and every parity gate
records the features it was measured with, and a comparison across CPU kinds is split, not averaged.
"""

from __future__ import annotations

import os
import platform
from functools import cache
from pathlib import Path
from typing import Any

# the flags (x86) and features (ARM) that decide which int8 kernels run
INT8_FLAGS = ("avx2", "avx512bw", "avx512_vnni", "avx_vnni", "avx_vnni_int8", "amx_int8", "asimd", "asimddp", "i8mm")
VNNI = ("avx512_vnni", "avx_vnni", "avx_vnni_int8", "amx_int8")
# the flags (x86) and features (ARM) with bf16 / fp16 arithmetic: without them autocast converts and computes in fp32
HALF_FLAGS = ("avx512_bf16", "avx512_fp16", "avx_ne_convert", "amx_bf16", "amx_fp16", "bf16", "fphp", "asimdhp")


@cache
def cpu_flags() -> frozenset[str]:
    """This CPU's flags (x86) or features (ARM); empty where ``/proc/cpuinfo`` is unreadable."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags |= set(value.split())
    return frozenset(flags)


def int8_features() -> tuple[str, ...]:
    """This CPU's int8-relevant flags, in :data:`INT8_FLAGS` order."""
    return tuple(flag for flag in INT8_FLAGS if flag in cpu_flags())


def half_features() -> tuple[str, ...]:
    """This CPU's bf16 / fp16 arithmetic flags, in :data:`HALF_FLAGS` order (what mixed precision runs on)."""
    return tuple(flag for flag in HALF_FLAGS if flag in cpu_flags())


def cpu_kind(features: tuple[str, ...] | list[str] | None = None) -> str:
    """One word for the int8 kernels a CPU gets: ``x86-vnni``, ``x86-avx512``, ``x86-avx2``, ``arm-dotprod``,
    ``arm`` or ``other`` (this CPU's without ``features``)."""
    found = set(int8_features() if features is None else features)
    if found & set(VNNI):
        return "x86-vnni"
    if "avx512bw" in found:
        return "x86-avx512"
    if "avx2" in found:
        return "x86-avx2"
    if "asimddp" in found:
        return "arm-dotprod"
    return "arm" if "asimd" in found else "other"


# environment variables that make torch's or oneDNN's kernels act as on an older CPU (an emulated CPU kind)
DISPATCH_OVERRIDES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def kernel_kind() -> str:
    """:func:`cpu_kind` with the kernel dispatch overrides this process runs under, e.g. ``x86-vnni
    (ATEN_CPU_CAPABILITY=default)``: what a record ran on, where an override emulates another CPU."""
    overrides = [f"{name}={os.environ[name]}" for name in DISPATCH_OVERRIDES if os.environ.get(name)]
    return cpu_kind() + (f" ({', '.join(overrides)})" if overrides else "")


@cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ort_kernel(features: tuple[str, ...] | list[str] | None, unsigned_weights: bool) -> str:
    """The MLAS kernel ONNX Runtime multiplies int8 matrices with on a CPU of ``features``."""
    kind = cpu_kind(features)
    if unsigned_weights:
        if kind.startswith("x86"):
            return "MLAS u8 x u8: operands widened to int16, pairs added into int32 (vpmaddwd): exact"
        return "MLAS u8 x u8 (udot / umull): exact"
    if kind == "x86-vnni":
        return "MLAS u8 x s8 with VNNI (vpdpbusd): exact"
    if kind in ("x86-avx2", "x86-avx512"):
        return "MLAS u8 x s8 with vpmaddubsw: pairs of products saturate at int16"
    return "MLAS u8 x s8"


def runtime_versions(kind: str) -> dict[str, str]:
    """The versions of the runtime that plays an artifact of ``kind`` (its registered ``packages``)."""
    from importlib.metadata import PackageNotFoundError, version

    from quarl_bench.deploy.targets import KINDS

    packages = KINDS.get(kind).packages
    found = {}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def load_record() -> dict[str, Any]:
    """The machine's load as a timing is taken: the 1-minute load average against the cores; ``busy`` when the
    load exceeds them (other work then shares the cores, and a timing says more about it than about the code)."""
    import os

    cores = os.cpu_count() or 1
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:  # no load average on this platform
        return {"load_1m": None, "cores": cores, "busy": False}
    return {"load_1m": load, "cores": cores, "busy": load > cores}


def load_before_run(seconds: float = 1.0) -> dict[str, Any]:
    """The load a run starts under, taken while it has no process of its own: the CPU time every process used over
    the last ``seconds`` (psutil), in cores, beside the 1-minute load average, which still counts a run that ended
    a minute ago (a grid's previous run); ``busy`` when others kept over a quarter of the cores busy."""
    import psutil

    record = load_record()
    busy_cores = round(psutil.cpu_percent(interval=seconds) / 100 * int(record["cores"]), 2)
    return record | {"busy_cores": busy_cores, "busy": busy_cores > int(record["cores"]) / 4}


def load_text(load: dict | None) -> str:
    """``load 6.12 on 2 cores (busy)`` for a stored load record ('' where none was recorded); a record taken before
    a run says how many cores others kept busy then."""
    if not load or load.get("load_1m") is None:
        return ""
    busy = f", {load['busy_cores']:.2f} busy before it" if "busy_cores" in load else ""
    return f"load {load['load_1m']:.2f} on {load['cores']} cores{busy}" + (" (busy)" if load.get("busy") else "")


def machine_record() -> dict[str, object]:
    """What a timing or a gate records of the machine it ran on, with its load at that moment."""
    return {
        "cpu": cpu_model(),
        "arch": platform.machine(),
        "int8_features": list(int8_features()),
        "half_features": list(half_features()),
        "cpu_kind": cpu_kind(),
        "load": load_record(),
    }


# the dtypes a GPU's tensor cores multiply, by compute capability (NVIDIA's architecture whitepapers: Volta 7.0,
# Turing 7.5, Ampere 8.0/8.6/8.7, Ada 8.9, Hopper 9.0, Blackwell 10.0/12.0); the first entry at or below a GPU's
TENSOR_CORE_DTYPES = (
    ((12, 0), ("fp16", "bf16", "tf32", "fp8", "fp6", "fp4", "int8")),
    ((10, 0), ("fp16", "bf16", "tf32", "fp8", "fp6", "fp4", "int8", "fp64")),
    ((9, 0), ("fp16", "bf16", "tf32", "fp8", "int8", "fp64")),
    ((8, 9), ("fp16", "bf16", "tf32", "fp8", "int8", "int4")),
    ((8, 6), ("fp16", "bf16", "tf32", "int8", "int4")),
    ((8, 0), ("fp16", "bf16", "tf32", "int8", "int4", "fp64")),
    ((7, 5), ("fp16", "int8", "int4")),
    ((7, 0), ("fp16",)),
)


def tensor_core_dtypes(capability: tuple[int, int]) -> tuple[str, ...]:
    """What the tensor cores of a GPU of ``capability`` take (none before Volta)."""
    return next((dtypes for at_least, dtypes in TENSOR_CORE_DTYPES if capability >= at_least), ())


def device_record(device: str) -> dict[str, object]:
    """What a timed run records of the device it trained on: on cuda the GPU's name, compute capability and the
    dtypes its tensor cores take; on cpu the CPU and its bf16/fp16 and int8 features."""
    if device == "cuda":
        import torch

        capability = tuple(torch.cuda.get_device_capability())
        return {
            "device": "cuda",
            "gpu": torch.cuda.get_device_name(),
            "capability": ".".join(map(str, capability)),
            "tensor_cores": list(tensor_core_dtypes((int(capability[0]), int(capability[1])))),
        }
    return {
        "device": "cpu",
        "cpu": cpu_model(),
        "half_features": list(half_features()),
        "int8_features": list(int8_features()),
        "cpu_kind": cpu_kind(),
    }


def device_units(record: dict | None) -> str:
    """A row's device in a report's words: the GPU and its tensor cores' dtypes, or the CPU's bf16/fp16 units
    (``none`` for a CPU without them)."""
    if not isinstance(record, dict):
        return "not recorded"
    if record.get("device") == "cuda":
        dtypes = ", ".join(record.get("tensor_cores") or []) or "none"
        return f"{record.get('gpu', 'GPU')} (sm {record.get('capability', '?')}; tensor cores: {dtypes})"
    flags = record.get("half_features")
    return (" ".join(flags) or "none") if isinstance(flags, list) else "not recorded"
