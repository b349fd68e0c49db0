"""One handler per method, registered by the spec's method: how that method gets the agent its jobs evaluate.

``ptq`` evaluates an existing agent (found by :func:`quarl_bench.zoo.agents.resolve_agent`); ``qat`` and ``amp``
train one first (or find it trained in the cache). Evaluation itself is shared: :func:`methods.ptq.evaluate_job`.
A new method is a new entry in ``TRAINERS``, not a new path through the CLI.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quarl_bench.types import AgentRef

Trainer = Callable[[Any, Path], AgentRef]
# method -> "module:function" producing its agent from (config, cache_dir); imported lazily (torch, rl-zoo3).
TRAINERS = {"qat": "quarl_bench.methods.qat:train_qat", "amp": "quarl_bench.methods.amp:train_amp"}
# method -> "module:function" evaluating one job on a loaded agent; PTQ's serves every method not listed.
EVALUATORS = {
    "deploy": "quarl_bench.methods.deploy:evaluate_job",
    "random": "quarl_bench.methods.random_policy:evaluate_job",
}
DEFAULT_EVALUATOR = "quarl_bench.methods.ptq:evaluate_job"


def trainer(method: str) -> Trainer:
    """The function that produces the agent of a training method's config: ``(config, cache_dir) -> AgentRef``."""
    module, name = TRAINERS[method].split(":")
    return getattr(importlib.import_module(module), name)


def evaluator(method: str) -> Callable[..., Any]:
    """``(agent, job, driver) -> EvalResult`` for a job of ``method``."""
    module, name = EVALUATORS.get(method, DEFAULT_EVALUATOR).split(":")
    return getattr(importlib.import_module(module), name)
