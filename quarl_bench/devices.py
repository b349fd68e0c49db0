"""Where training runs: the one rule for ``--device`` (amp) and ``--learner-device`` (actorq)."""

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
