"""A record run's ``record_run.json`` is kept as the run goes: a run killed outright leaves its wall time so far,
one stopped by Ctrl-C says so, and the run that resumes either carries it on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quarl_bench.report.run_log import RunLog

KILLED_RUN = """
import sys, time
from pathlib import Path
from quarl_bench.report.run_log import RunLog
with RunLog(Path(sys.argv[1]), {"plan_seconds": 120.0}, heartbeat=0.05) as log:
    log.done_so_far(1, 4)
    print("answered", flush=True)
    time.sleep(600)
"""


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_run_killed_outright_leaves_its_wall_so_far_and_the_next_run_carries_it(tmp_path: Path) -> None:
    path = tmp_path / "record_run.json"
    killed = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(path)], stdout=subprocess.PIPE, text=True)
    assert killed.stdout is not None and killed.stdout.readline().strip() == "answered"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and read(path)["wall_seconds"] < 0.3:  # the heartbeat, with no answer
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    left = read(path)  # whole, though killed while writing every 0.05 s
    assert left["status"] == "running" and left["wall_seconds"] >= 0.3
    assert left["questions_answered"] == [1, 4] and left["plan_seconds"] == 120.0 and "load_last" in left
    assert not list(tmp_path.glob(".*partial"))
    carried = {k: v for k, v in left.items() if k not in ("earlier_runs", "wall_seconds_all_runs")}  # flat history

    with RunLog(path, {"plan_seconds": 60.0}) as resumed:
        assert read(path)["earlier_runs"] == [carried]  # on disk from its start: killed again, it still has it
        run = resumed.finish()
    assert run["status"] == "finished" and run["earlier_runs"] == [carried] and "load_at_end" in run
    assert run["wall_seconds_all_runs"] == pytest.approx(run["wall_seconds"] + left["wall_seconds"], abs=0.11)
    assert run["wall_all_runs_over_first_plan"] == pytest.approx(run["wall_seconds_all_runs"] / 120.0, abs=0.002)
    assert read(path) == run

    with RunLog(path, {"plan_seconds": 60.0}):  # after a finished run, a new one starts its own history
        assert read(path)["earlier_runs"] == []


def test_a_run_stopped_by_ctrl_c_says_so_and_its_history_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "record_run.json"
    with pytest.raises(KeyboardInterrupt), RunLog(path, {"plan_seconds": 10.0}) as log:
        log.done_so_far(2, 5)
        raise KeyboardInterrupt
    first = read(path)
    assert first["status"] == "interrupted" and first["stopped_by"] == "KeyboardInterrupt"
    assert first["questions_answered"] == [2, 5]
    with pytest.raises(RuntimeError), RunLog(path, {"plan_seconds": 5.0}):
        raise RuntimeError("a worker died")
    second = read(path)
    assert second["status"] == "interrupted" and [r["plan_seconds"] for r in second["earlier_runs"]] == [10.0]
    with RunLog(path, {"plan_seconds": 1.0}):
        assert [r["plan_seconds"] for r in read(path)["earlier_runs"]] == [10.0, 5.0]  # oldest first, flat


def test_a_record_run_json_written_before_runs_were_logged_counts_as_finished(tmp_path: Path) -> None:
    path = tmp_path / "record_run.json"
    path.write_text(json.dumps({"plan_seconds": 9.0, "wall_seconds": 8.0, "wall_over_plan": 0.889}))
    with RunLog(path, {"plan_seconds": 1.0}):
        assert read(path)["earlier_runs"] == []
    path.write_text("{ not json")
    with RunLog(path, {"plan_seconds": 1.0}):
        assert read(path)["earlier_runs"] == []
