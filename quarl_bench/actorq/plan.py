"""What a set of ActorQ runs needs, and what fits on this machine: ``actorq --plan`` (and ``--concurrent``).

A run holds one core per actor, one for its learner and one for its parameter quantizer (the driver's loop is idle
between broadcasts); a cuda learner holds a share of the GPU instead of a core, and runs share one GPU. Runs of
different seeds or precisions go side by side when the cores allow; each batch of side-by-side runs lasts as long as
its longest run (its ``--max-seconds``; a run without one is bounded by its step budget, whose time the plan cannot
know), plus the cluster's start (measured here: 12.6 s for ``ray.init``; RAY_START_SECONDS).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from quarl_bench.actorq.config import ActorQConfig

RAY_START_SECONDS = 15.0  # ray.init of a local cluster plus the actors' start, measured 12.6-15 s here


def cores_per_run(config: ActorQConfig, gpus: int) -> int:
    """The cores one run keeps busy: its actors, its quantizer, and its learner unless the learner is on a GPU."""
    on_gpu = gpus > 0 and config.learner_device in (None, "cuda")
    return config.n_actors + 1 + (0 if on_gpu else 1)


@dataclass(frozen=True)
class ActorQPlan:
    """How ``runs`` would go on a machine of ``cores`` cores and ``gpus`` GPUs."""

    runs: int
    cores: int
    gpus: int
    per_run: int  # cores a run keeps busy
    side_by_side: int  # runs that fit at once
    batches: int
    seconds: float | None  # None: some run has no --max-seconds
    budget: float | None = None

    @property
    def fits(self) -> bool | None:
        """Whether the runs fit the budget (None: no budget, or no bound on a run's time)."""
        if self.budget is None or self.seconds is None:
            return None
        return self.seconds <= self.budget

    def lines(self) -> list[str]:
        gpu = f", {self.gpus} GPU" + ("s" if self.gpus != 1 else "") if self.gpus else ", no GPU"
        said = [
            f"{self.runs} runs; each keeps {self.per_run} cores busy (actors, quantizer"
            + (", learner)" if not self.gpus else "; learners share the GPU)"),
            f"this machine: {self.cores} cores{gpu}: {self.side_by_side} run"
            + ("s" if self.side_by_side != 1 else "")
            + f" side by side, {self.batches} batch"
            + ("es" if self.batches != 1 else ""),
        ]
        if self.side_by_side > 1:
            said.append(f"run them with --concurrent {self.side_by_side}")
        if self.seconds is None:
            said.append("time: unknown (a run without --max-seconds ends at its step budget); pass --max-seconds")
        else:
            said.append(
                f"time: ~{self.seconds / 60:.1f} min ({self.batches} x (the longest run + {RAY_START_SECONDS:.0f} s start))"
            )
        if self.fits is not None and self.budget is not None:
            said.append(f"budget {self.budget / 60:.1f} min: {'fits' if self.fits else 'does not fit'}")
        return said


def plan_runs(
    configs: Sequence[ActorQConfig],
    cores: int | None = None,
    gpus: int | None = None,
    concurrent: int | None = None,
    budget: float | None = None,
) -> ActorQPlan:
    """The plan for ``configs`` on ``cores`` and ``gpus`` (default: this machine's), at most ``concurrent`` runs
    side by side (default: as many as the cores hold)."""
    cores = cores or os.cpu_count() or 1
    gpus = _gpus() if gpus is None else gpus
    per_run = max(cores_per_run(config, gpus) for config in configs)
    fit = max(1, cores // per_run)
    side_by_side = max(1, min(fit, concurrent or fit, len(configs)))
    batches = math.ceil(len(configs) / side_by_side)
    limits = [config.max_seconds for config in configs]
    seconds = None
    if all(limit is not None for limit in limits):
        longest = max(limit for limit in limits if limit is not None)
        seconds = batches * (longest + RAY_START_SECONDS)
    return ActorQPlan(len(configs), cores, gpus, per_run, side_by_side, batches, seconds, budget)


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
