"""Run work: find or train the agent, build its jobs, skip the stored ones, evaluate the rest, store each row.

A :class:`Work` is one agent's share of a command or sweep; executors (``executors.py``) run many of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from quarl_bench.methods import trainer
from quarl_bench.registry import EvalSettings, GridCell, build_jobs
from quarl_bench.store import ResultStore
from quarl_bench.types import AgentRef, EvalResult, QuantSpec


@dataclass(frozen=True)
class Work:
    """Some jobs of one agent, run by one worker from one loaded copy of the agent.

    :param method: the spec method (``ptq``, ``qat``, ``amp``): the jobs' method and the handler that gets the agent.
    :param ref: the agent, when it exists already (PTQ); otherwise ``training`` says how to train it.
    :param training: a training method's config (``QATConfig``, ``AmpConfig``).
    :param cache: where trained agents are kept.
    :param skip: keys already stored (executors whose workers cannot read the store).
    :param driver: the driver's provenance, stored with every row.
    :param eval_workers: processes that play each evaluation's envs (``--eval-workers``; 1: this process).
    """

    method: str
    algo: str
    env_id: str
    specs: tuple[QuantSpec, ...]
    settings: EvalSettings
    ref: AgentRef | None = None
    training: Any = None
    cache: Path = Path("results/agents")
    skip: frozenset[str] = frozenset()
    driver: dict[str, Any] = field(default_factory=dict)
    eval_workers: int = 1

    def agent(self) -> AgentRef:
        if self.ref is not None:
            return self.ref
        return trainer(self.method)(self.training, self.cache)


def evaluations(work: Work, is_stored: Callable[[str], bool]) -> Iterator[EvalResult]:
    """Evaluate the work's jobs that are not stored; the agent is loaded at most once, and only if needed."""
    from quarl_bench.methods import evaluator
    from quarl_bench.zoo.agents import load_agent

    ref = work.agent()
    agent = None
    for job in build_jobs(ref, list(work.specs), work.settings, work.method):
        if job.key in work.skip or is_stored(job.key):
            continue
        agent = agent or load_agent(ref)
        yield evaluator(job.spec.method)(agent, job, work.driver, eval_workers=work.eval_workers)


def run_work(
    work: Work,
    store: ResultStore,
    force: bool = False,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate and store the jobs not yet stored (all with ``force``); return the stored rows in job order (a job
    left to another worker, ``work.skip``, only once it is stored).

    ``on_result(row, reused)`` is called per job as it is stored or found.
    """
    ref = work.agent()
    keys = [job.key for job in build_jobs(ref, list(work.specs), work.settings, work.method)]
    keys = [key for key in keys if key not in work.skip or store.has(key)]  # another worker's job: maybe not yet
    reused = {key for key in keys if not force and store.has(key)}
    for key in reused:
        if on_result:
            on_result(_stored(store, key), True)
    for result in evaluations(replace(work, ref=ref), lambda key: key in reused):
        store.put(result, replace=force)
        if on_result:
            on_result(_stored(store, result.job.key), False)
    return [_stored(store, key) for key in keys]


def _stored(store: ResultStore, key: str) -> dict[str, Any]:
    row = store.get(key)
    assert row is not None, f"job {key} is not in {store.path}"
    return row


@dataclass(frozen=True)
class AgentSources:
    """Where a sweep may take agents from (see :func:`quarl_bench.zoo.agents.resolve_agent`)."""

    folder: Path | None
    cache: Path
    use_hub: bool = False
    train_if_missing: bool = False
    trust_remote_code: bool = False


@dataclass(frozen=True)
class Skipped:
    algo: str
    env_id: str
    reason: str


def plan(
    cells: list[GridCell],
    sources: AgentSources,
    store: ResultStore,
    workers: int,
    force: bool,
    driver: dict[str, Any],
    random_baseline: bool = False,
) -> tuple[list[Work], list[Skipped], int]:
    """Resolve each (algo, env) once, drop stored jobs, deal the rest over ``workers``; one Work per QAT run.
    ``random_baseline``: each PTQ agent's random-policy job per seed too.

    Returns the work, the combinations skipped with their reason, and how many jobs were already stored.
    """
    from quarl_bench.methods.qat import QATConfig

    works: list[Work] = []
    ptq_cells: list[GridCell] = []
    for cell in cells:
        if cell.method == "qat":
            config = QATConfig(cell.algo, cell.env_id, cell.precision, cell.quant_delay, cell.n_timesteps, cell.seed)
            works.append(
                Work(
                    "qat",
                    cell.algo,
                    cell.env_id,
                    (cell.spec,),
                    EvalSettings(cell.episodes, 0),
                    training=config,
                    cache=sources.cache,
                    driver=driver,
                )
            )
        else:
            ptq_cells.append(cell)
    agents, skipped = resolve_cells(ptq_cells, sources)
    done = 0
    for ref, group in agents:
        env_id = group[0].env_id
        for (seed, episodes), specs in _by_settings(group).items():
            settings = EvalSettings(episodes, seed, random_baseline=random_baseline)
            jobs = build_jobs(ref, specs, settings)
            pending = jobs if force else [job for job in jobs if not store.has(job.key)]
            done += len(jobs) - len(pending)
            keys = {job.key for job in jobs}
            shares = [pending[i :: min(workers, len(pending))] for i in range(min(workers, len(pending)))]
            for share in shares:  # the fp32 reference is evaluated by the first share only
                mine = {job.key for job in share}
                works.append(
                    Work(
                        "ptq",
                        ref.algo,
                        env_id,
                        tuple(j.spec for j in share if not j.spec.is_identity),
                        settings,
                        ref,
                        skip=frozenset(keys - mine),
                        driver=driver,
                    )
                )
    return works, skipped, done


def resolve_cells(
    cells: list[GridCell], sources: AgentSources
) -> tuple[list[tuple[AgentRef, list[GridCell]]], list[Skipped]]:
    """Each agent of some PTQ grid cells resolved once, with its cells; the agents the sources lack, with why."""
    from quarl_bench.errors import QuarlError

    by_agent: dict[tuple[str, str, str, tuple[str, ...]], list[GridCell]] = {}
    for cell in cells:
        by_agent.setdefault((cell.algo, cell.env_id, cell.model, cell.env_packages), []).append(cell)
    agents, skipped = [], []
    for (algo, env_id, model, _), group in by_agent.items():
        try:
            agents.append((cell_agent(group[0], sources, sources.use_hub), group))
        except QuarlError as error:
            skipped.append(Skipped(model or algo, env_id, str(error)))
    return agents, skipped


def cell_agent(cell: GridCell, sources: AgentSources, use_hub: bool) -> AgentRef:
    """The agent of a PTQ grid cell: its policy file, or the zoo agent the sources have.

    :raises QuarlError: when there is none.
    """
    from quarl_bench.zoo.agents import resolve_agent
    from quarl_bench.zoo.model_file import model_ref

    if cell.model:
        return model_ref(cell.model, cell.env_id, env_packages=cell.env_packages)
    return resolve_agent(
        cell.algo,
        cell.env_id,
        sources.folder,
        sources.cache,
        use_hub,
        sources.train_if_missing,
        trust_remote_code=sources.trust_remote_code,
    )


def _by_settings(cells: list[GridCell]) -> dict[tuple[int, int], list[QuantSpec]]:
    groups: dict[tuple[int, int], list[QuantSpec]] = {}
    for cell in cells:
        groups.setdefault((cell.seed, cell.episodes), []).append(cell.spec)
    return groups
