"""The application layer: functions that take plain values and return data, one per thing a command does.

The CLI (``cli.py`` -> ``commands/``) parses arguments, calls one of these and renders what it returns; Python
callers use them directly. ``evaluate_agent`` is the one-call entry point (lm-evaluation-harness's
``simple_evaluate`` shape): a path, a loaded SB3 model or a torch module, on an env id or factory.
"""

from __future__ import annotations

from quarl_bench.api.agents import AgentQuery, acting_layer_names, resolve
from quarl_bench.api.deploy import export_artifact, run_deploy
from quarl_bench.api.evaluate import (
    MixedSearch,
    certify_agent,
    evaluate_agent,
    measure_fidelity,
    mixed_ladder,
    run_ptq,
    run_sensitivity,
    search_mixed,
)
from quarl_bench.api.rollout import run_rollouts
from quarl_bench.api.sweep import SweepOutcome, SweepPlan, agent_sources, grid_agents, plan_sweep, run_method, run_sweep
from quarl_bench.api.table4 import time_table4
from quarl_bench.api.train import run_actorq_runs, run_amp, train_agent

__all__ = [
    "AgentQuery",
    "MixedSearch",
    "SweepOutcome",
    "SweepPlan",
    "agent_sources",
    "grid_agents",
    "plan_sweep",
    "resolve",
    "run_actorq_runs",
    "run_amp",
    "run_method",
    "run_sensitivity",
    "run_sweep",
    "train_agent",
    "acting_layer_names",
    "certify_agent",
    "evaluate_agent",
    "export_artifact",
    "measure_fidelity",
    "mixed_ladder",
    "run_deploy",
    "run_ptq",
    "run_rollouts",
    "search_mixed",
    "time_table4",
]
