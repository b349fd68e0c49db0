"""Certification spread over workers: the same verdicts after the same episodes in this process, on a local pool of
two, and after a SIGKILL mid-certification and a rerun (the batches are ordinary stored jobs)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
KILL_HOOK = Path(__file__).with_name("kill_hook.py")
GRID = """
name: two_agents
episodes: 20
seeds: [0]
grid:
  - {algos: [a2c, dqn], envs: [CartPole-v1], precisions: [8, 6, 2]}
  - {algos: [a2c, dqn], envs: [CartPole-v1], precisions: [8, 6, 2], granularity: per-channel}
"""


def verdicts(stdout: str) -> list[tuple]:
    """(agent, spec, verdict, episodes, mean) of every verdict of ``certify --json``'s lines, in order."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            answer = json.loads(line)
            agent = answer["agent"]
            found += [
                (agent, v["precision"], v["verdict"], v["episodes"], round(v["mean"], 9)) for v in answer["verdicts"]
            ]
    return found


def test_one_worker_two_workers_and_a_killed_run_give_the_same_verdicts(zoo: Path, tmp_path: Path) -> None:
    grid = tmp_path / "two_agents.yaml"
    grid.write_text(GRID)
    exe = Path(sys.executable).with_name("quarl-bench")

    def certify(store: str, *extra: str, hook: str | None = None) -> subprocess.CompletedProcess:
        arguments = [
            "certify",
            "--grid",
            grid,
            "-f",
            zoo,
            "--max-episodes",
            "100",
            "--tolerance",
            "20",
            "--json",
            "--store",
        ]
        arguments += [tmp_path / store, *extra]
        command = [sys.executable, KILL_HOOK, hook] if hook else [exe]
        return subprocess.run([*command, *map(str, arguments)], capture_output=True, text=True, timeout=900)

    inline = certify("inline.sqlite")
    assert inline.returncode == 0, inline.stderr
    expected = verdicts(inline.stdout)
    # dqn CartPole's per-tensor walk stops at int6 (unsafe after one batch), its per-channel walk at int2
    dqn = [v[1:4] for v in expected if v[0] == "dqn/CartPole-v1"]
    assert ("int6", "unsafe", 20) in dqn and ("int2 per-channel", "unsafe", 20) in dqn
    assert not any(v[1] == "int2" for v in dqn)  # never asked: its walk stopped above it
    assert len([v for v in expected if v[0] == "a2c/CartPole-v1"]) == 6

    pooled = certify("pool.sqlite", "--workers", "2")
    assert pooled.returncode == 0, pooled.stderr
    assert verdicts(pooled.stdout) == expected

    killed = certify("killed.sqlite", hook="7")  # dies right after its 7th stored row, mid-certification
    assert killed.returncode == -signal.SIGKILL
    resumed = certify("killed.sqlite")
    assert resumed.returncode == 0, resumed.stderr
    assert verdicts(resumed.stdout) == expected


def test_bad_executor_flags_are_one_line(cli, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    code, _, err = cli("certify", "--env", "CartPole-v1", "--address", "127.0.0.1:1", "--store", store)
    assert code == 2 and "a Ray address needs --executor ray" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("certify", "--env", "CartPole-v1", "--workers", "0", "--store", store)
    assert code == 2 and "--workers" in err and "positive integer" in err
    assert not store.exists()


def test_an_unreachable_ray_address_is_one_line_and_stores_nothing(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    agent = ("--algo", "ppo", "--env", "CartPole-v1", "-f", zoo, "--store", store)
    code, _, err = cli("certify", *agent, "--executor", "ray", "--address", "127.0.0.1:1")
    assert code == 2 and "cannot reach the Ray cluster at '127.0.0.1:1'" in err and len(err.strip().splitlines()) == 1
    assert not store.exists()
