"""A lab's own additions to quarl-bench, registered from outside its package through the ``quarl_bench.plugins``
entry point (see ``pyproject.toml``). Importing this package registers all four; each module imports only
quarl-bench's light registration modules at its top, torch and the rest inside its functions, so ``quarl-bench
--help`` stays fast with the plugin installed."""

from quarl_lab import nf4, ort_folded, stochastic, weight_noise

__all__ = ["nf4", "ort_folded", "stochastic", "weight_noise"]
