"""Optional parts of quarl-bench (``pip install 'quarl-bench[EXTRA]'``): a command that needs a missing one says
which extra to install, in one line, instead of failing on an import deep inside."""

from __future__ import annotations

import importlib.util

from quarl_bench.errors import QuarlError

# extra -> the modules it brings (pyproject.toml's optional dependencies)
EXTRAS = {
    "distributed": ("ray", "codecarbon", "onnx", "onnxruntime", "psutil"),
    "deploy": ("onnx", "onnxruntime", "torchao"),
    "mujoco": ("mujoco", "dm_control", "shimmy"),
    "edge": ("litert_torch", "ai_edge_litert", "executorch"),
}


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise one line naming the extra when any of its ``modules`` (default: all of the extra's) is missing.

    :param what: what needs it, for the message (``"ActorQ"``, ``"--model policy.onnx"``).
    :raises QuarlError: ``ActorQ needs the 'distributed' extra (ray is not installed): pip install ...``.
    """
    for module in modules or EXTRAS[extra]:
        if importlib.util.find_spec(module) is None:
            raise QuarlError(
                f"{what} needs the '{extra}' extra ({module} is not installed): pip install 'quarl-bench[{extra}]'"
            )
