"""Run jobs: load the agent once, evaluate fp32 and each requested precision, store each result."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from quarl_bench.evaluate import evaluate
from quarl_bench.quant.ptq import quantize, weight_profile
from quarl_bench.store import ResultStore
from quarl_bench.types import AgentRef, EvalResult, Job, QuantSpec
from quarl_bench.zoo.agents import LoadedAgent, load_agent
from quarl_bench.zoo.envs import default_eval_envs, env_kind

PACKAGES = ("quarl-bench", "torch", "stable-baselines3", "sb3-contrib", "rl-zoo3", "gymnasium", "ale-py", "numpy")


@dataclass(frozen=True)
class EvalSettings:
    """How every job of a run is evaluated.

    :param episodes: episodes per job (QuaRL used 100).
    :param seed: env ``i`` is seeded ``seed + i``; fp32 and quantized jobs share seeds, so share episodes.
    :param n_envs: envs stepped together with batched inference; None = ``zoo_configs/envs.yaml``.
    """

    episodes: int = 100
    seed: int = 0
    n_envs: int | None = None


def build_jobs(ref: AgentRef, specs: Sequence[QuantSpec], settings: EvalSettings, method: str = "ptq") -> list[Job]:
    """The fp32 reference job first, then one job per distinct requested spec (all of ``method``)."""
    n_envs = min(settings.n_envs or default_eval_envs(ref.env_id), settings.episodes)
    deterministic = env_kind(ref.env_id) != "atari"
    fp32 = QuantSpec("fp32", method=method)
    base = Job(ref.algo, ref.env_id, fp32, ref.content_hash, settings.episodes, settings.seed, n_envs, deterministic)
    jobs = [base]
    for spec in specs:
        job = replace(base, spec=spec)
        if job not in jobs:
            jobs.append(job)
    return jobs


def run_jobs(
    ref: AgentRef,
    jobs: Sequence[Job],
    store: ResultStore,
    force: bool = False,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate the jobs not yet stored (all with ``force``) and return every job's stored row.

    The agent is loaded at most once, and only if some job has to run. The store fills in E% against the
    fp32 row of the same agent and episodes whichever is stored first. ``on_result(row, reused)`` is called per job.
    """
    agent: LoadedAgent | None = None
    rows: list[dict[str, Any]] = []
    for job in jobs:
        row = None if force else store.get(job.key)
        reused = row is not None
        if row is None:
            agent = agent or load_agent(ref)
            store.put(run_job(agent, job), replace=force)
            row = store.get(job.key)
            assert row is not None
        rows.append(row)
        if on_result:
            on_result(row, reused)
    return rows


def run_job(agent: LoadedAgent, job: Job) -> EvalResult:
    """Quantize a copy of the agent's policy per ``job.spec`` and evaluate it on ``job``'s episodes."""
    fp32_policy = agent.model.policy
    fp32_policy.set_training_mode(False)
    policy, layers = quantize(fp32_policy, job.algo, job.spec)
    env = agent.make_env(job.n_envs, job.seed)
    try:
        reference = None if job.spec.is_identity else fp32_policy
        episodes = evaluate(policy, env, job.episodes, job.seed, job.deterministic, reference=reference)
    finally:
        env.close()
    return EvalResult(
        job=job,
        episode_rewards=tuple(episodes.rewards),
        episode_lengths=tuple(episodes.lengths),
        wall_seconds=episodes.wall_seconds,
        layers=layers,
        action_agreement=episodes.agreement,
        provenance=provenance(agent.ref),
        weights=weight_profile(fp32_policy, job.algo),
    )


TRAINING_RECORD = "quarl_training.json"


def provenance(ref: AgentRef) -> dict[str, Any]:
    """Where the agent came from, how quarl-bench trained it (if it did) and what code evaluated it."""
    record = Path(ref.run_dir) / TRAINING_RECORD
    return {
        "training": json.loads(record.read_text()) if record.is_file() else None,
        "agent_source": ref.source,
        "agent_path": ref.run_dir,
        "saved_env_id": ref.saved_env_id,
        "versions": package_versions(),
        "git_commit": git_commit(),
        "command": " ".join(sys.argv),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


@cache
def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


@cache
def git_commit() -> str | None:
    repo = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None
