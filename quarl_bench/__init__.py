"""quarl-bench: post-training quantization and evaluation of RL policies (QuaRL / ActorQ).

The public API is imported lazily (PEP 562), so ``quarl-bench --help`` does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it (or "module:name" where the public name differs)
_API = {
    # one call per command (quarl_bench.api) and what they take and return
    "AgentQuery": "quarl_bench.api",
    "evaluate_agent": "quarl_bench.api",
    "certify_agent": "quarl_bench.api",
    "harden_agent": "quarl_bench.api.harden",
    "certify_hardening": "quarl_bench.api.harden",
    "run_ptq": "quarl_bench.api",
    "run_rollouts": "quarl_bench.api",
    "resolve": "quarl_bench.api",
    "CertifyConfig": "quarl_bench.methods.certify_config",
    "RolloutConfig": "quarl_bench.methods.rollout",
    "ActorQConfig": "quarl_bench.actorq.config",
    "EvalSettings": "quarl_bench.grids",
    "EvalResult": "quarl_bench.types",
    "Job": "quarl_bench.types",
    "QuantSpec": "quarl_bench.types",
    "DeployTarget": "quarl_bench.types",
    "QuarlError": "quarl_bench.errors",
    "ResultStore": "quarl_bench.store",
    "Variant": "quarl_bench.store",
    "load_results": "quarl_bench.results",
    "write_report": "quarl_bench.report.writer",
    "config_dir": "quarl_bench.config",
    # building blocks, as the benchmarks time them
    "load_agent": "quarl_bench.zoo.agents",
    "resolve_agent": "quarl_bench.zoo.agents",
    "quantize": "quarl_bench.quant.quantize",
    "evaluate": "quarl_bench.evaluation.evaluate",
    "evaluate_in_workers": "quarl_bench.evaluation.workers",
    "action_mode": "quarl_bench.grids",
    "default_eval_envs": "quarl_bench.zoo.envs",
    "visited_states": "quarl_bench.evaluation.calibration",
    "load_study": "quarl_bench.grids",
    "select_cells": "quarl_bench.grids:select",
    "build_artifact": "quarl_bench.deploy.backends:build",
    "export_artifact": "quarl_bench.api",
    "BACKEND_NEEDS": "quarl_bench.backend_registry",
    "artifact_runner": "quarl_bench.deploy.backends:runner",
    "BACKEND_PRECISIONS": "quarl_bench.backend_registry",
    "INT8_BACKENDS": "quarl_bench.backend_registry",
    "DeployablePolicy": "quarl_bench.deploy.export",
    "split_normalizer": "quarl_bench.deploy.export",
    "deploy_calibration_states": "quarl_bench.methods.deploy",
    "TABLE4_POLICIES": "quarl_bench.deploy.synthetic",
    "greedy_mlp": "quarl_bench.deploy.synthetic",
    "synthetic_observations": "quarl_bench.deploy.synthetic:observations",
    "latency": "quarl_bench.deploy.timing",
    "peak_memory_mb": "quarl_bench.deploy.timing",
    "run_actorq": "quarl_bench.actorq.driver",
    "actorq_result": "quarl_bench.actorq.driver",
    "actor_breakdown": "quarl_bench.actorq.metrics:breakdown",
    "actorq_runs": "quarl_bench.report.actorq",
    "speedup_table": "quarl_bench.report.actorq",
    "acting_network": "quarl_bench.actorq.policy",
    "actor_policy": "quarl_bench.actorq.policy",
    "build_policy": "quarl_bench.actorq.policy",
    "training_device": "quarl_bench.devices",
    "RolloutPPO": "quarl_bench.training.quantized_rollouts",
    "silence_library_warnings": "quarl_bench.zoo.quiet",
    "console": "quarl_bench.report.console",
    "zoo_steps": "quarl_bench.api.harden",
}
__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'quarl_bench' has no attribute {name!r}")
    module, _, attribute = _API[name].partition(":")
    return getattr(importlib.import_module(module), attribute or name)
