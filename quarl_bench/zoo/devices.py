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
