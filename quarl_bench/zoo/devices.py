"""Where training runs: the one rule for ``--device`` (amp) and ``--learner-device`` (actorq), and the one torch
thread each worker process keeps."""

from __future__ import annotations

from quarl_bench.errors import QuarlError


def training_device(requested: str | None, flag: str = "device") -> str:
    """``cuda`` when asked for or, by default, when torch sees a GPU; else ``cpu``.

    :raises QuarlError: naming ``flag`` when cuda is asked for and torch sees no GPU.
    """
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise QuarlError(f"bad {flag} 'cuda': no GPU is visible to torch here; expected cpu")
    return requested or ("cuda" if torch.cuda.is_available() else "cpu")


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
    from quarl_bench.deploy.machine import cpu_kind, cpu_model, half_features, int8_features

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


def one_torch_thread() -> None:
    """Workers already fill the cores; torch's own intra-op threads on top of them made PPO training 10x slower
    here (each worker's threads spin and wait for a core held by the other worker). numpy's BLAS and OpenMP pools
    too: with two of their threads per worker, a 2-worker certification took 1.9x the time of one process (their
    threads spin after each small product). Library chatter off, too."""
    import torch
    from threadpoolctl import threadpool_limits

    from quarl_bench.zoo.quiet import silence_library_warnings

    silence_library_warnings()
    torch.set_num_threads(1)
    threadpool_limits(1)  # BLAS and OpenMP, each call (~1 ms): a work may have loaded another pool since the last
