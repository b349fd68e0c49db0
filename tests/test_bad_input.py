"""Bad input: one line on stderr naming the value and what is accepted, exit code 2, the store untouched."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import torch

from quarl_bench.store import ResultStore

CARTPOLE = ("--algo", "ppo", "--env", "CartPole-v1")


def file_digest(path: Path) -> str | None:
    """Content hash of a file (None if absent): to check that a failed command wrote nothing."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "quarl.sqlite"
    ResultStore(path).close()
    return path


def copy_agent(zoo: Path, tmp_path: Path, algo: str, env_id: str) -> Path:
    """A writable copy of one zoo agent in a fresh zoo folder; returns its run dir."""
    run_dir = tmp_path / "zoo" / algo / f"{env_id}_1"
    shutil.copytree(zoo / algo / f"{env_id}_1", run_dir)
    for path in [run_dir, *run_dir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return run_dir


def assert_one_line_error(result: tuple[int, str, str], *fragments: str) -> None:
    code, _, err = result
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("bits", ["0", "1", "33", "abc"])
def test_bad_bits(cli, store: Path, bits: str) -> None:  # refused by argparse: no zoo needed
    before = file_digest(store)
    result = cli("run", *CARTPOLE, "--bits", bits, "--store", store)
    assert_one_line_error(result, repr(bits), "an integer 2-32", "fp16")
    assert file_digest(store) == before


def test_unknown_algo(cli, store: Path) -> None:
    before = file_digest(store)
    assert_one_line_error(
        cli("run", "--algo", "impala", "--env", "CartPole-v1", "--store", store), "'impala'", "ppo_lstm", "qrdqn"
    )
    assert file_digest(store) == before


def test_unknown_env(cli, tmp_path: Path, store: Path) -> None:
    before = file_digest(store)
    result = cli("run", "--algo", "ppo", "--env", "Brekout", "--folder", tmp_path, "--store", store)
    assert_one_line_error(result, "'Brekout'", "Breakout")
    assert file_digest(store) == before


def test_folder_without_agent(cli, tmp_path: Path, store: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    before = file_digest(store)
    args = ("run", *CARTPOLE, "--folder", empty, "--cache", tmp_path / "cache", "--no-hub", "--store", store)
    assert_one_line_error(cli(*args), "no ppo agent for CartPole-v1", str(empty), "--train-if-missing")
    assert file_digest(store) == before


def test_missing_folder(cli, tmp_path: Path, store: Path) -> None:
    assert_one_line_error(cli("run", *CARTPOLE, "--folder", tmp_path / "nope", "--store", store), "does not exist")


def test_hub_unreachable(cli, tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.delenv("QUARL_ZOO", raising=False)
    before = file_digest(store)
    result = cli("run", *CARTPOLE, "--cache", tmp_path / "cache", "--store", store)
    assert_one_line_error(result, "hub sb3/ppo-CartPole-v1", "unreachable")
    assert file_digest(store) == before


def test_corrupt_zip(cli, zoo: Path, tmp_path: Path, store: Path) -> None:
    run_dir = copy_agent(zoo, tmp_path, "ppo", "CartPole-v1")
    (run_dir / "CartPole-v1.zip").write_bytes(b"this is not a zip file")
    before = file_digest(store)
    result = cli("run", *CARTPOLE, "--folder", tmp_path / "zoo", "--no-hub", "--store", store)
    assert_one_line_error(result, "cannot load agent", "CartPole-v1.zip", "SB3 model zip")
    assert file_digest(store) == before


def test_unreadable_vecnormalize(cli, zoo: Path, tmp_path: Path, store: Path) -> None:
    run_dir = copy_agent(zoo, tmp_path, "a2c", "Acrobot-v1")
    (run_dir / "Acrobot-v1" / "vecnormalize.pkl").write_bytes(b"\x80\x04garbage")
    before = file_digest(store)
    result = cli(
        "run", "--algo", "a2c", "--env", "Acrobot-v1", "--folder", tmp_path / "zoo", "--no-hub", "--store", store
    )
    assert_one_line_error(result, "unreadable normalization stats", "vecnormalize.pkl", "VecNormalize pickle")
    assert file_digest(store) == before


def test_failed_run_creates_no_store(cli, tmp_path: Path) -> None:
    store = tmp_path / "never.sqlite"
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ("run", *CARTPOLE, "--folder", empty, "--cache", tmp_path / "cache", "--no-hub", "--store", store)
    assert cli(*args)[0] == 2
    assert not store.exists()


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (("--policy-arch", "64,x"), ("'64,x'", "comma-separated positive integers")),
        (("--algo", "dqn", "--env", "Pendulum-v1"), ("'dqn'", "Pendulum-v1", "expected td3, ddpg or d4pg")),
        (("--algo", "td3", "--env", "CartPole-v1"), ("'td3'", "Discrete actions", "expected dqn")),
        (("--actor-precision", "int8", "--comm-bits", "12"), ("bad comm bits 12", "32, 16 or 2-8")),
        (("--policy-arch", "32", "--address", "127.0.0.1:1"), ("cannot reach the Ray cluster at '127.0.0.1:1'",)),
        pytest.param(
            ("--learner-device", "cuda"),
            ("bad learner device 'cuda'", "no GPU"),
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU"),
        ),
    ],
)
def test_bad_actorq_input(cli, store: Path, flags: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    before = file_digest(store)
    assert_one_line_error(cli("actorq", *flags, "--store", store), *fragments)
    assert file_digest(store) == before


def test_store_that_is_not_sqlite(cli, tmp_path: Path) -> None:  # refused before any agent is looked for
    store = tmp_path / "results.sqlite"
    store.write_bytes(b"PK\x03\x04 not a database")
    before = file_digest(store)
    assert_one_line_error(cli("run", *CARTPOLE, "--folder", tmp_path, "--store", store), "is not an SQLite database")
    assert_one_line_error(cli("report", "--store", store), "is not an SQLite database")
    assert file_digest(store) == before


def test_locked_store(cli, store: Path) -> None:
    import sqlite3

    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert_one_line_error(cli("results", "--store", store), "cannot be opened", "database is locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
