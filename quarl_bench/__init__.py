"""quarl-bench: post-training quantization and evaluation of RL policies (QuaRL / ActorQ).

The public API is imported lazily (PEP 562), so ``quarl-bench --help`` does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_API = {
    "AgentQuery": "quarl_bench.api",
    "evaluate_agent": "quarl_bench.api",
    "certify_agent": "quarl_bench.api",
    "CertifyConfig": "quarl_bench.methods.certify",
    "find_agent": "quarl_bench.api",
    "EvalResult": "quarl_bench.types",
    "Job": "quarl_bench.types",
    "QuantSpec": "quarl_bench.types",
    "QuarlError": "quarl_bench.errors",
    "ResultStore": "quarl_bench.store",
    "Variant": "quarl_bench.store",
    "evaluate": "quarl_bench.evaluation.evaluate",
    "load_agent": "quarl_bench.zoo.agents",
    "load_results": "quarl_bench.results",
    "quantize": "quarl_bench.quant.quantize",
    "RolloutConfig": "quarl_bench.methods.rollout",
    "run_rollouts": "quarl_bench.api",
    "resolve_agent": "quarl_bench.zoo.agents",
}
__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'quarl_bench' has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)
