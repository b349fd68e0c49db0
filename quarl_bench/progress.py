"""Progress of long work: a bar on a terminal, one line per finished unit when output is redirected.

Both say done / total, the time elapsed and an estimate of what remains from the measured time per unit so far
(rich's bar shows nothing until the end when its output is a file, so redirected runs get lines instead).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

Update = Callable[..., None]  # update(completed=None, last=None)


def clock(seconds: float) -> str:
    """``seconds`` as 42s, 3m05s or 1h02m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


# Units finishing this soon after the start, before any unit took longer, were found stored (a resumed run): they
# count as done before the clock, or a resumed run would promise the rest at their speed.
INSTANT_SECONDS = 0.5
SILENCE_SECONDS = 60.0  # a unit still running after this long gets a line saying so (called again with no change)


def remaining(done: float, total: float, elapsed: float) -> float | None:
    """Seconds left at the mean time per unit so far (None before the first unit)."""
    return elapsed / done * (total - done) if done > 0 else None


class LineProgress:
    """One line per step of at least ``every`` units (and the last): ``[done/total] what, elapsed, ~left``."""

    def __init__(self, total: float, what: str, stream: IO[str], every: float = 1) -> None:
        self.total, self.what, self.stream, self.every = total, what, stream, every
        self.start = time.perf_counter()
        self.printed = 0.0
        self.found_done, self.found_at = 0.0, self.start  # units found already done, and when the last was
        self.measuring = False
        self.line_at = self.start

    def __call__(self, completed: float | None = None, last: str | None = None) -> None:
        if completed is None:
            return
        now = time.perf_counter()
        if completed <= self.printed and now - self.line_at >= SILENCE_SECONDS:
            self._write(
                f"[{_count(self.printed)}/{_count(self.total)}] {self.what}: {clock(now - self.start)} elapsed, "
                "still working on the next",
                now,
            )
            return
        if completed <= self.printed or (completed - self.printed < self.every and completed < self.total):
            return
        self.printed = completed
        elapsed = now - self.start
        if not self.measuring and now - self.found_at < INSTANT_SECONDS:
            self.found_done, self.found_at = completed, now
        else:
            self.measuring = True
        left = remaining(completed - self.found_done, self.total - self.found_done, now - self.found_at)
        line = f"[{_count(completed)}/{_count(self.total)}] {self.what}: {clock(elapsed)} elapsed"
        line += f", ~{clock(left)} left" if left is not None and completed < self.total else ""
        self._write(line + (f"  {last}" if last else ""), now)

    def _write(self, line: str, now: float) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self.line_at = now


def _count(value: float) -> str:
    return f"{value:,.0f}"


@contextmanager
def progress(total: float, what: str = "jobs", stream: IO[str] | None = None, every: float = 1) -> Iterator[Update]:
    """Yields ``update(completed=None, last=None)``: a rich bar on a terminal, lines (every ``every`` units) when
    ``stream`` (default stderr) is redirected."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield LineProgress(total, what, stream, every)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(
        *columns, TimeRemainingColumn(), TextColumn("{task.fields[last]}"), console=Console(file=stream)
    ) as bar:
        task = bar.add_task(what, total=total, last="")

        def update(completed: float | None = None, last: str | None = None) -> None:
            fields: dict[str, Any] = {} if last is None else {"last": last}
            bar.update(task, completed=completed, **fields)

        yield update
