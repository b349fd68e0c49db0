"""Certification as a driver over ordinary work: every paired batch is a stored PTQ (or deploy) job that an
executor runs (this process, a local pool or Ray), and the pure decision (``statistics/certification.py``, through
``certify/plan.py``'s :class:`~quarl_bench.certify.plan.Certifier`) is taken here after each batch.

Many agents, and each agent's families, are walked side by side: each walk is a generator that yields the jobs it
needs; a job already stored is read, one in flight is waited for once, any other is submitted. Within one family
the walk stays in order (a width is asked only once the one before it is safe). Verdicts depend only on the stored
rows, whose jobs are seeded, so one worker, N workers and Ray give the same verdicts after the same episodes, and a
killed run resumes from its stored rows. This driver is the only writer of verdicts; workers write only rows.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from quarl_bench.certify.plan import (
    Certifier,
    CertifyRequest,
    Ladder,
    Need,
    Question,
    Scale,
    verdict_key,
    walk_family,
)
from quarl_bench.certify.result import VERDICT_FIELDS
from quarl_bench.errors import QuarlError
from quarl_bench.jobs.work import Work
from quarl_bench.methods.agent_evaluation import PlannedJobs
from quarl_bench.run.executors import Executor
from quarl_bench.statistics.certification import PASSING
from quarl_bench.store import ResultStore
from quarl_bench.types import AgentRef, Job, spec_identity


@dataclass(frozen=True)
class Decided:
    """A walk's answer to one question: its verdicts-table row, and whether it was stored before (reused)."""

    ladder: int
    question: int
    row: dict[str, Any]
    reused: bool
    family: str


@dataclass(frozen=True)
class Unasked:
    """The questions a walk leaves unasked when it stops (they count as done for progress)."""

    count: int


@dataclass
class Outcome:
    """What a request's certification found: δ's scale set, and each verdict in walk order; ``certifier`` the plan
    that decided them (its test reads the stored rows again)."""

    request: CertifyRequest
    certifier: Certifier
    scale: Scale | None = None
    decided: list[Decided] = field(default_factory=list)

    def verdict_rows(self) -> list[Decided]:
        return sorted(self.decided, key=lambda found: (found.ladder, found.question))


@dataclass
class _Walk:
    request: int
    steps: Generator[Any, Any, Any]
    ladder: int = -1  # -1: the scale walk (δ), which starts the ladders when it ends
    need: Need | None = None
    waiting: set[str] = field(default_factory=set)


VerdictCallback = Callable[[int, Decided], None]
ProgressCallback = Callable[[int, int], None]  # (questions done or left unasked, questions in all)


def question_count(requests: list[CertifyRequest]) -> int:
    """The questions of every request's ladders: what a certification's progress counts."""
    return sum(len(ladder.questions) for request in requests for ladder in request.ladders)


def certify_all(
    requests: list[CertifyRequest],
    store: ResultStore,
    executor: Executor,
    driver: dict[str, Any],
    force: bool = False,
    on_verdict: VerdictCallback | None = None,
    on_progress: ProgressCallback | None = None,
) -> list[Outcome]:
    """Certify every request's ladders, evaluating the batches the store lacks on ``executor`` (closed at the end)
    and storing each verdict as it is decided; with ``force`` stored verdicts are decided again (stored rows are
    always reused: they are the same seeded episodes).

    :param on_verdict: called with the request's index and each verdict as it is decided or found.
    :param on_progress: called with the questions answered or left unasked so far, and the total.
    :raises QuarlError: for bad settings (before anything runs), or a batch that failed (a return outside the
        bounds): the first such error ends the run, with the verdicts decided so far stored.
    """
    certifiers = [Certifier(r.ref, r.settings, r.baseline) for r in requests]  # bad settings: before any work
    outcomes = [Outcome(request, certifier) for request, certifier in zip(requests, certifiers, strict=True)]
    waiting: dict[str, list[_Walk]] = {}
    total, done = question_count(requests), 0

    def count(questions: int) -> None:
        nonlocal done
        done += questions
        if on_progress:
            on_progress(done, total)

    def rows_of(need: Need) -> dict[str, Any]:
        found = {job.key: store.get(job.key) for job in need.jobs}
        return found | {job.key: store.get(job.key) for job in need.optional}

    def submit(job: Job, certifier: Certifier) -> None:
        config = PlannedJobs(certifier.agent_of(job), (job,), certifier.return_bounds_checked)
        executor.submit(Work(config, driver=driver))  # an agent already resolved: no cache is read

    def advance(walk: _Walk, sent: Any) -> None:
        """Run ``walk`` until it waits for jobs in flight, or ends."""
        while True:
            try:
                message = walk.steps.send(sent)
            except StopIteration as stop:
                ended(walk, stop.value)
                return
            if isinstance(message, Decided):
                if not message.reused:
                    store.put_verdict(message.row, replace=force)
                outcomes[walk.request].decided.append(message)
                if on_verdict:
                    on_verdict(walk.request, message)
                count(1)
                sent = None
                continue
            if isinstance(message, Unasked):
                count(message.count)
                sent = None
                continue
            missing = [job for job in dict.fromkeys(message.jobs) if not store.has(job.key)]
            if not missing:
                sent = rows_of(message)
                continue
            walk.need, walk.waiting = message, {job.key for job in missing}
            for job in missing:
                if job.key not in waiting:
                    waiting[job.key] = []
                    submit(job, outcomes[walk.request].certifier)
                waiting[job.key].append(walk)
            return

    def ended(walk: _Walk, value: Any) -> None:
        if walk.ladder >= 0:
            return
        outcome = outcomes[walk.request]
        certifier = outcome.certifier
        outcome.scale = value
        for number, ladder in enumerate(outcome.request.ladders):
            steps = ladder_walk(certifier, outcome.request, number, ladder, value, store, driver, force)
            advance(_Walk(walk.request, steps, number), None)  # a new generator: its first step

    try:
        for number, certifier in enumerate(certifiers):
            advance(_Walk(number, certifier.scale()), None)
        while executor.busy():
            if on_progress:  # called with no change: a long question's progress line says it is still working
                on_progress(done, total)
            for work, _, error in executor.finished(timeout=1.0):
                if error is not None:
                    raise _one_line(error)
                for job in work.config.jobs:
                    for walk in waiting.pop(job.key, []):
                        walk.waiting.discard(job.key)
                        if not walk.waiting and walk.need is not None:
                            need, walk.need = walk.need, None
                            advance(walk, rows_of(need))
    finally:
        executor.close()
    return outcomes


def _one_line(error: BaseException) -> BaseException:
    """A worker's QuarlError (a return outside the bounds) as the one-line error it is; others as they are."""
    cause = getattr(error, "cause", None) or error  # Ray wraps a task's exception
    if isinstance(cause, QuarlError):
        return QuarlError(str(cause.args[0]) if cause.args else str(cause))
    return error


def ladder_walk(
    certifier: Certifier,
    request: CertifyRequest,
    number: int,
    ladder: Ladder,
    scale: Scale,
    store: ResultStore,
    driver: dict[str, Any],
    force: bool,
) -> Generator[Need | Decided | Unasked, Any, None]:
    """One ladder's questions in order: a stored verdict is reused (and decides the walk as it did then), another
    is decided on batches; a walk that ``stops`` ends at its first answer that is not safe, or with
    ``every_width`` goes on with its later answers marked exploratory (the fixed-sequence argument that bounds a
    family's wrong "safe" verdicts by α covers a walk only up to its first stop)."""
    settings = request.settings
    stopped = False
    for index, question in enumerate(ladder.questions):
        if stopped and not settings.every_width:
            yield Unasked(len(ladder.questions) - index)
            return
        key = verdict_key(
            request.ref,
            question.spec,
            settings,
            scale.delta,
            reference=question.reference if question.equivalence else None,
            baseline=request.baseline,
            families=request.families,
            target=question.target,
            by=question.by,
        )
        family = walk_family(question.spec)
        stored = None if force else store.get_verdict(key)
        if stored is not None:
            # a reused verdict keeps the label it was computed with: an exploratory "safe" stays exploratory and
            # stops this walk as it would have stopped the one that computed it
            exploratory = bool((stored.get("evidence") or {}).get("exploratory"))
            yield Decided(number, index, stored, True, family)
            decided = "exploratory" if exploratory else stored["verdict"]
        else:
            found = yield from certifier.certify(
                question.spec,
                scale,
                question.reference,
                question.equivalence,
                request.families,
                question.target,
                question.by,
            )
            found = replace(found, key=key)
            if stopped:
                found = replace(found, evidence=found.evidence | {"exploratory": True})
            row = verdict_row(found, request.ref, question, settings, scale.text, driver, request.baseline)
            yield Decided(number, index, row, False, family)
            decided = found.verdict
        if ladder.stops and decided not in PASSING:
            stopped = True


def verdict_row(
    found: Any,
    ref: AgentRef,
    question: Question,
    config: Any,
    tolerance: str,
    driver: dict[str, Any],
    baseline: AgentRef | None = None,
) -> dict[str, Any]:
    """The verdicts table's row of one verdict (``found``: a ``certification_result.Verdict``; ``config``: its
    ``CertifyConfig``); its settings name the baseline agent where there is one, and the test and its reference
    where the question names them (export's)."""
    settings = config.identity() | ({"baseline": baseline.content_hash} if baseline is not None else {})
    if question.test:
        settings |= {"test": question.test, "reference": spec_identity(question.reference)}
    return {
        "key": found.key,
        "algo": ref.algo,
        "env_id": ref.env_id,
        "agent_hash": ref.content_hash,
        **{name: getattr(found, name) for name in VERDICT_FIELDS},
        "spec_json": spec_identity(question.spec, question.method, question.target),
        "tolerance": tolerance,
        "settings": settings,
        "rows": list(found.rows),
        "evidence": dict(found.evidence),
        "provenance": driver,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
    }
