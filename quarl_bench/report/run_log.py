"""A long run's own record (``record``'s ``record_run.json``, ``reproduce``'s ``reproduction.json``), kept as the run
goes: a run killed with its session still leaves its wall time so far, the load it ran under and how far it got, and
the run that resumes it carries that record on, so work played in several runs shows the wall of each."""

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
    """``path`` rewritten whole (atomically) as each piece of work is done and every ``heartbeat`` seconds, with
    ``status`` ``running``, then ``finished``, or ``interrupted`` where the run raised (Ctrl-C, an error); a run
    killed outright stays ``running`` at its last heartbeat (``updated_at`` says when). ``fields`` (the command, the
    plan in ``plan_seconds``, the machine) are written as given, the count done so far as ``done_key``; ``finish`` adds
    what only a whole run has (its wall over its plan). An unfinished run found at ``path`` was cut short and this one
    continues it: it is kept in ``earlier_runs``, and ``wall_seconds_all_runs`` sums them."""

    def __init__(
        self,
        path: Path,
        fields: dict[str, Any],
        done_key: str = "questions_answered",
        heartbeat: float = HEARTBEAT_SECONDS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        from quarl_bench.deploy.machine import load_record

        self.path, self.fields, self.done_key = path, dict(fields), done_key
        self.heartbeat, self.clock = heartbeat, clock
        self.began, self.ended = clock(), float("nan")
        self.lock, self.stopped = threading.Lock(), threading.Event()
        self.beating = threading.Thread(target=self._beat_until_stopped, name="run-log-heartbeat", daemon=True)
        self.load_at_start = load_record()
        self.load_peak: float | None = self.load_at_start["load_1m"]
        self.done: tuple[int, int] | None = None
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

    def done_so_far(self, done: int, total: int, **fields: Any) -> None:
        """``done`` of ``total`` pieces of work done, with ``fields`` they changed (what each took): written at
        once."""
        with self.lock:
            self.done = (done, total)
            self.fields |= fields
        self.write()

    def finish(self) -> dict[str, Any]:
        """The whole run's record, written, with what only its end knows: its wall over its plan (``null`` where
        nothing was planned: the store held every answer, and a wall over zero means nothing) and, where it continued
        runs cut short, the wall of them all over the first run's plan."""
        self._stop_beating()
        self.ended, self.status = self.clock(), "finished"
        plan = float(self.fields.get("plan_seconds") or 0)
        self.closing = {"wall_over_plan": round(self.wall() / plan, 3) if plan > 0 else None}
        first_plan = float(self.earlier[0].get("plan_seconds") or 0) if self.earlier else 0.0
        if first_plan > 0:
            self.closing["wall_all_runs_over_first_plan"] = round(self.wall_all_runs() / first_plan, 3)
        return self.write()

    def wall(self) -> float:
        """Seconds since the run began, or until it finished."""
        return (self.ended if self.status == "finished" else self.clock()) - self.began

    def wall_all_runs(self) -> float:
        """This run's wall and those of the runs cut short that it continues."""
        return self.wall() + sum(float(run.get("wall_seconds") or 0) for run in self.earlier)

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
                self.done_key: None if self.done is None else list(self.done),
                "load_at_start": self.load_at_start,
                "load_at_end" if self.status == "finished" else "load_last": load_now,
                "load_1m_peak": self.load_peak,
                "earlier_runs": self.earlier,
                "wall_seconds_all_runs": round(self.wall_all_runs(), 1),
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


def continued_text(run: dict[str, Any], path: Path) -> str:
    """The console's line for a finished run that continued runs cut short ("with the 1 run(s) it continued (cut
    short, from out/record_run.json): 4m01s in all against the first run's plan of 6m09s (0.65x)"); "" where it
    continued none."""
    from quarl_bench.progress import clock

    if not run["earlier_runs"]:
        return ""
    text = (
        f"with the {len(run['earlier_runs'])} run(s) it continued (cut short, from {path}): "
        f"{clock(run['wall_seconds_all_runs'])} in all"
    )
    if "wall_all_runs_over_first_plan" in run:
        text += (
            f" against the first run's plan of {clock(run['earlier_runs'][0]['plan_seconds'])} "
            f"({run['wall_all_runs_over_first_plan']:.2f}x)"
        )
    return text


def set_aside_finished(path: Path) -> None:
    """A finished run's record at ``path`` renamed by when it was written (``reproduction-20261204T071500.json``), so
    that the next run neither overwrites it nor takes it for its own past; one cut short stays (the next run carries
    it on)."""
    if path.is_file() and not unfinished_runs(path):
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(path.stat().st_mtime))
        path.rename(path.with_name(f"{path.stem}-{stamp}{path.suffix}"))
