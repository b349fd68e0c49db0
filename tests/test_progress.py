"""Progress lines: a resumed run's stored units do not set the pace of the rest."""

from __future__ import annotations

import io

import pytest

from quarl_bench import progress


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    return now


def test_stored_units_found_at_start_do_not_count_toward_the_pace(fake_clock: list[float]) -> None:
    out = io.StringIO()
    line = progress.LineProgress(10, "questions", out)
    for done in (1, 2, 3, 4):  # found stored: no time passes
        line(completed=done)
    fake_clock[0] += 60.0  # the first question played takes a minute
    line(completed=5)
    last = out.getvalue().splitlines()[-1]
    assert last == "[5/10] questions: 1m00s elapsed, ~5m00s left"


def test_a_fresh_run_is_paced_by_every_unit(fake_clock: list[float]) -> None:
    out = io.StringIO()
    line = progress.LineProgress(4, "jobs", out)
    for done in (1, 2):
        fake_clock[0] += 30.0
        line(completed=done)
    assert out.getvalue().splitlines() == [
        "[1/4] jobs: 30s elapsed, ~1m30s left",
        "[2/4] jobs: 1m00s elapsed, ~1m00s left",
    ]


def test_a_long_unit_gets_a_line_a_minute_saying_it_is_still_working(fake_clock: list[float]) -> None:
    out = io.StringIO()
    line = progress.LineProgress(3, "questions", out)
    fake_clock[0] += 10.0
    line(completed=1)
    fake_clock[0] += 30.0
    line(completed=1)  # called again with no change, under a minute of silence: nothing
    fake_clock[0] += 31.0
    line(completed=1)
    assert out.getvalue().splitlines()[1:] == ["[1/3] questions: 1m11s elapsed, still working on the next"]
