"""A long run's own record (``record_run.json``), kept as the run goes: a run killed with its session still leaves
its wall time so far, the load it ran under and how many questions it answered, and the run that resumes it carries
that record on, so a record played in several runs shows the wall of each."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

HEARTBEAT_SECONDS = 30.0  # how stale a killed run's wall time may be (one Atari question runs an hour)


class RunLog:
    """``path`` rewritten whole (atomically) as each question is answered and every ``heartbeat`` seconds, with
    ``status`` ``running``, then ``finished``, or ``interrupted`` where the run raised (Ctrl-C, an error); a run
    killed outright stays ``running`` at its last heartbeat (``updated_at`` says when). ``fields`` (the command, the plan, the machine) are written as given;
    ``finish`` adds the ones only a whole run has (its wall over its plan). An unfinished run found at ``path`` was cut
    short and this one continues it: it is kept in ``earlier_runs``, and ``wall_seconds_all_runs`` sums them."""

    def __init__(
        self,
        path: Path,
        fields: dict[str, Any],
        heartbeat: float = HEARTBEAT_SECONDS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        from quarl_bench.deploy.machine import load_record

        self.path, self.fields, self.heartbeat, self.clock = path, fields, heartbeat, clock
        self.began, self.ended = clock(), float("nan")
        self.lock, self.stopped = threading.Lock(), threading.Event()
        self.beating = threading.Thread(target=self._beat_until_stopped, name="record-run-heartbeat", daemon=True)
        self.load_at_start = load_record()
        self.load_peak: float | None = self.load_at_start["load_1m"]
        self.answered: tuple[int, int] | None = None
        self.earlier = unfinished_runs(path)
        self.status, self.closing = "running", dict[str, Any]()

    def __enter__(self) -> RunLog:
        self.write()
        self.beating.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop_beating()
        if kind is not None and self.status == "running":
            self.status = "interrupted"
            self.closing = {"stopped_by": kind.__name__}
            self.write()

    def _stop_beating(self) -> None:
        self.stopped.set()
        if self.beating.is_alive():
            self.beating.join()

    def _beat_until_stopped(self) -> None:
        while not self.stopped.wait(self.heartbeat):
            self.write()

    def answered_so_far(self, done: int, total: int) -> None:
        """``done`` of ``total`` questions answered: written at once."""
        self.answered = (done, total)
        self.write()

    def finish(self, closing: Callable[[RunLog], dict[str, Any]]) -> dict[str, Any]:
        """The whole run's record, written, with what only its end knows (``closing`` of this log, its clock
        stopped: the wall over the plan)."""
        self._stop_beating()
        self.ended, self.status = self.clock(), "finished"
        self.closing = closing(self)
        return self.write()

    def wall(self) -> float:
        """Seconds since the run began, or until it finished."""
        return (self.ended if self.status == "finished" else self.clock()) - self.began

    def write(self) -> dict[str, Any]:
        with self.lock:  # the heartbeat's thread and the run's
            return self._write()

    def _write(self) -> dict[str, Any]:
        from quarl_bench.deploy.machine import load_record

        load_now = load_record()
        if load_now["load_1m"] is not None:
            self.load_peak = max(self.load_peak or 0.0, load_now["load_1m"])
        wall = round(self.wall(), 1)
        record = (
            self.fields
            | {
                "status": self.status,
                "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "wall_seconds": wall,
                "questions_answered": None if self.answered is None else list(self.answered),
                "load_at_start": self.load_at_start,
                "load_at_end" if self.status == "finished" else "load_last": load_now,
                "load_1m_peak": self.load_peak,
                "earlier_runs": self.earlier,
                "wall_seconds_all_runs": round(wall + sum(float(r.get("wall_seconds") or 0) for r in self.earlier), 1),
            }
            | self.closing
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(f".{self.path.name}.partial")
        staging.write_text(json.dumps(record, indent=2, default=str))
        os.replace(staging, self.path)  # whole or not at all: a kill mid-write leaves the last heartbeat
        return record


def unfinished_runs(path: Path) -> list[dict[str, Any]]:
    """The runs cut short before the one about to start, oldest first: the record at ``path`` and the ones it
    carries, where it did not finish (a finished record is a whole answer, not this run's past); [] when none."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):  # no earlier run, or not a file this module wrote
        return []
    if not isinstance(found, dict) or found.get("status") in (None, "finished"):
        return []
    earlier = [run for run in found.pop("earlier_runs", []) if isinstance(run, dict)]
    found.pop("wall_seconds_all_runs", None)
    return [*earlier, found]
