"""quarl-bench: post-training quantization and evaluation of RL policies (QuaRL / ActorQ).

The public API is imported lazily (PEP 562), so ``quarl-bench --help`` does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it: what users call (building blocks are imported from their modules)
_API = {
    # where a policy comes from, and the one interface every kind of policy acts through
    "AgentQuery": "quarl_bench.api",
    "resolve": "quarl_bench.api",
    "as_policy": "quarl_bench.zoo.policy",
    # one call per command (quarl_bench.api)
    "evaluate_agent": "quarl_bench.api",
    "run_ptq": "quarl_bench.api",
    "certify_agent": "quarl_bench.api",
    "harden_agent": "quarl_bench.api.harden",
    "export_artifact": "quarl_bench.api",
    "run_rollouts": "quarl_bench.api",
    "run_actorq": "quarl_bench.actorq.driver",
    # what they take
    "QuantSpec": "quarl_bench.types",
    "deploy_target": "quarl_bench.deploy.targets",
    "CertifyConfig": "quarl_bench.certify.config",
    "RolloutConfig": "quarl_bench.methods.rollout",
    "ActorQConfig": "quarl_bench.actorq.config",
    # what they leave: the store, its frames and the report
    "ResultStore": "quarl_bench.store",
    "Variant": "quarl_bench.store",
    "load_results": "quarl_bench.store.results",
    "write_report": "quarl_bench.report.writer",
    "QuarlError": "quarl_bench.errors",
}
__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'quarl_bench' has no attribute {name!r}")
    module, _, attribute = _API[name].partition(":")
    return getattr(importlib.import_module(module), attribute or name)
