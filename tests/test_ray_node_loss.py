"""Losing a Ray node mid-sweep and mid-certification: a head and a second node (``ray start``) on this machine, the
second node's raylet SIGKILLed by process id by the driver itself right after its Nth stored row (``kill_hook.py``:
an event, not a poll, so a fast machine cannot finish first). The sweep must finish with every job stored exactly
once, no row half-written, and none of Ray's own output on the user's console (it goes to ``<store>.ray.log``); the
certification must give the verdicts that one process gives."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from quarl_bench.config import config_dir

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the raylet through /proc (Linux)"),
]
EPISODES = 3
SEEDS = ("0", "1", "2", "3", "4", "5")  # 6 seeds x (fp32, fp16, int8, int4) = 24 jobs of ppo CartPole
KILL_AFTER_ROWS = 4


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture()
def two_nodes(tmp_path: Path) -> Iterator[tuple[str, int, dict[str, str]]]:
    """A head node and a second node; yields (address, the second raylet's process id, the env to join them)."""
    ray = Path(sys.executable).with_name("ray")
    env = os.environ | {"RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}  # Ray 2.60 clusters use tokens
    port, node_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus", "1", "--disable-usage-stats"]
    head = [ray, "start", "--head", "--port", str(port), "--include-dashboard=false", *common]
    second = [ray, "start", "--address", address, "--node-manager-port", str(node_port), *common]
    try:
        for command in (head, second):
            subprocess.run(command, env=env, check=True, capture_output=True, timeout=120)
        raylets = [pid for pid, line in processes() if "raylet" in line and f"--node_manager_port={node_port}" in line]
        assert len(raylets) == 1, "the second node's raylet was not found"
        yield address, raylets[0], env
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)


def processes() -> list[tuple[int, str]]:
    """(process id, command line) of every process, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
            except OSError:  # ended meanwhile
                continue
    return found


def stored_rows(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not there yet, or a writer holds the lock for a moment
        return 0


def test_a_sweep_survives_a_node_loss_quietly(two_nodes, zoo: Path, tmp_path: Path) -> None:
    address, raylet, env = two_nodes
    store = tmp_path / "quarl.sqlite"
    command = [
        Path(sys.executable).with_name("quarl-bench"),
        "sweep",
        config_dir() / "smoke.yaml",
        "--algo",
        "ppo",
        "-n",
        str(EPISODES),
        "--eval-seeds",
        *SEEDS,
        "--executor",
        "ray",
        "--address",
        address,
        "--workers",
        "4",
        "--folder",
        zoo,
        "--cache",
        tmp_path / "cache",
        "--store",
        store,
    ]
    killer = [sys.executable, Path(__file__).with_name("kill_hook.py"), str(KILL_AFTER_ROWS)]
    sweep = subprocess.run(
        [*killer, *map(str, command[1:])],
        env=env | {"QUARL_TEST_KILL_PID": str(raylet)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out, err = sweep.stdout, sweep.stderr
    assert sweep.returncode == 0, err
    assert not Path(f"/proc/{raylet}").exists() or "Z" in Path(f"/proc/{raylet}/stat").read_text().split()[2]
    total = len(SEEDS) * 4
    with sqlite3.connect(store) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM results")]
        rewards = [json.loads(r) for (r,) in db.execute("SELECT episode_rewards FROM results")]
    assert len(keys) == len(set(keys)) == total  # every job stored, each once
    assert all(len(r) == EPISODES for r in rewards)  # no row half-written
    console = out + err
    assert "[state-dump]" not in console and "core_worker" not in console, console[-2000:]
    assert (tmp_path / "quarl.ray.log").is_file()


def test_a_certification_survives_a_node_loss_with_the_same_verdicts(two_nodes, zoo: Path, tmp_path: Path) -> None:
    address, raylet, env = two_nodes
    exe = Path(sys.executable).with_name("quarl-bench")
    arguments = ["certify", "--algo", "dqn", "--env", "CartPole-v1", "-f", zoo, "--bits", "8", "6", "4"]
    arguments += ["--granularity", "per-channel", "--tolerance", "20", "--max-episodes", "100", "--json"]
    inline = subprocess.run(
        [exe, *map(str, arguments), "--store", tmp_path / "inline.sqlite"], capture_output=True, text=True, timeout=600
    )
    assert inline.returncode == 0, inline.stderr
    killer = [sys.executable, Path(__file__).with_name("kill_hook.py"), str(KILL_AFTER_ROWS)]
    on_ray = [
        *arguments,
        "--executor",
        "ray",
        "--address",
        address,
        "--workers",
        "2",
        "--store",
        tmp_path / "ray.sqlite",
    ]
    ray = subprocess.run(
        [*killer, *map(str, on_ray)],
        env=env | {"QUARL_TEST_KILL_PID": str(raylet)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ray.returncode == 0, ray.stderr

    def verdicts(out: str) -> list[tuple]:
        answer = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
        return [(v["precision"], v["verdict"], v["episodes"], v["mean"]) for v in answer["verdicts"]]

    assert verdicts(ray.stdout) == verdicts(inline.stdout)
    assert stored_rows(tmp_path / "ray.sqlite") > KILL_AFTER_ROWS
