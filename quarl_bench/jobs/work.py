"""The one unit every executor runs: a registered method config with how its agent is evaluated, where trained
agents go, and the provenance its rows carry (``methods/protocol.py`` says how a method produces its rows)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quarl_bench.jobs.grids import EvalSettings


@dataclass(frozen=True)
class Work:
    """One method config's jobs, run by one worker (an agent is loaded or trained once per work).

    :param config: a registered method config (``PTQConfig``, ``DeployConfig``, ``QATConfig``, ``AmpConfig``,
        ``RolloutConfig``, ``ActorQConfig``).
    :param settings: how the method's agent is evaluated (methods whose runs evaluate themselves ignore it).
    :param cache: where trained agents are kept.
    :param skip: keys left to other works (executors whose workers cannot read the store).
    :param driver: the driver's provenance, stored with every row.
    :param eval_workers: processes that play each evaluation's envs (``--eval-workers``; 1: this process).
    :param retrain: train again even when the cache holds the run (``rollout --force``).
    :param address: a Ray cluster for methods that start their own (ActorQ); None: a local one.
    :param log_path: where such a method sends Ray's own logging.
    :param progress: called with a method's progress reports (ActorQ's evaluations); in-process works only.
    """

    config: Any
    settings: EvalSettings = field(default_factory=EvalSettings)
    cache: Path = Path("results/agents")
    skip: frozenset[str] = frozenset()
    driver: dict[str, Any] = field(default_factory=dict)
    eval_workers: int = 1
    retrain: bool = False
    address: str | None = None
    log_path: Path | None = None
    progress: Callable[..., None] | None = field(default=None, compare=False)

    @property
    def method(self) -> str:
        return self.config.method

    @property
    def algo(self) -> str:
        return self.config.algo

    @property
    def env_id(self) -> str:
        return self.config.env_id
