"""The results store: one SQLite row per job, keyed by the job's identity hash."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from quarl_bench.types import EvalResult, relative_error

DEFAULT_STORE = Path("results/quarl.sqlite")
JSON_COLUMNS = ("episode_rewards", "episode_lengths", "layers", "agreement", "provenance", "weights")
SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    reference_key TEXT NOT NULL,
    algo TEXT NOT NULL,
    env_id TEXT NOT NULL,
    method TEXT NOT NULL,
    precision TEXT NOT NULL,
    bits INTEGER NOT NULL,
    granularity TEXT NOT NULL,
    symmetric INTEGER NOT NULL,
    quantize_bias INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    episodes INTEGER NOT NULL,
    n_envs INTEGER NOT NULL,
    deterministic INTEGER NOT NULL,
    agent_hash TEXT NOT NULL,
    agent_source TEXT,
    agent_path TEXT,
    mean_reward REAL NOT NULL,
    std_reward REAL NOT NULL,
    min_reward REAL NOT NULL,
    max_reward REAL NOT NULL,
    fp32_reward REAL,
    error_pct REAL,
    total_steps INTEGER NOT NULL,
    wall_seconds REAL NOT NULL,
    episode_rewards TEXT NOT NULL,
    episode_lengths TEXT NOT NULL,
    layers TEXT NOT NULL,
    agreement TEXT NOT NULL,
    provenance TEXT NOT NULL,
    weights TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
)
"""


# Give every quantized row of this fp32 job its reference reward and E% = (R_fp32 - R_q) / |R_fp32| * 100.
FILL_ERRORS = """
UPDATE results SET fp32_reward = :reward,
    error_pct = CASE WHEN :reward = 0 THEN NULL ELSE (:reward - mean_reward) / abs(:reward) * 100.0 END
WHERE reference_key = :key AND key != :key
"""


class ResultStore:
    """Embedded SQLite store, WAL mode so several processes can write; each write is one transaction."""

    def __init__(self, path: str | Path = DEFAULT_STORE) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None

    @property
    def _connection(self) -> sqlite3.Connection:
        """Opened (and the file created) on first use, so a command that fails early leaves no file behind."""
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=60000")
            self._db.execute(SCHEMA)
            self._add_missing_columns(self._db)
        return self._db

    @staticmethod
    def _add_missing_columns(db: sqlite3.Connection) -> None:
        """Bring a store made by an older version up to the current schema (new columns only)."""
        have = {row[1] for row in db.execute("PRAGMA table_info(results)")}
        if "weights" not in have:
            db.execute("ALTER TABLE results ADD COLUMN weights TEXT NOT NULL DEFAULT '{}'")

    def _readable(self) -> bool:
        return self._db is not None or self.path.exists()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def has(self, key: str) -> bool:
        if not self._readable():
            return False
        return self._connection.execute("SELECT 1 FROM results WHERE key = ?", (key,)).fetchone() is not None

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored row of a job as a dict (JSON columns decoded), or None."""
        if not self._readable():
            return None
        cursor = self._connection.execute("SELECT * FROM results WHERE key = ?", (key,))
        row = cursor.fetchone()
        if row is None:
            return None
        return _decode(dict(zip([c[0] for c in cursor.description], row, strict=True)))

    def pending(self, keys: Iterable[str]) -> list[str]:
        """The keys not yet in the store, in the given order."""
        return [key for key in keys if not self.has(key)]

    def put(self, result: EvalResult, replace: bool = False) -> bool:
        """Write one job's row atomically; returns False (and writes nothing) if it exists and not ``replace``.

        E% is filled in from the fp32 row of the same agent and episodes, in whichever order the two arrive
        (parallel sweeps store them in any order).
        """
        db = self._connection
        with db:  # one transaction: a crash leaves the old state or the whole row
            db.execute("BEGIN IMMEDIATE")
            reference = result.job.reference().key
            found = db.execute("SELECT mean_reward FROM results WHERE key = ?", (reference,)).fetchone()
            fp32_reward = found[0] if found and reference != result.job.key else None
            row = result_row(result, fp32_reward)
            verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
            marks = ", ".join("?" for _ in row)
            sql = f"{verb} INTO results ({', '.join(row)}) VALUES ({marks})"
            cursor = db.execute(sql, tuple(row.values()))
            inserted = cursor.rowcount > 0
            if inserted and result.job.spec.is_identity:
                db.execute(FILL_ERRORS, {"reward": result.mean_reward, "key": result.job.key})
        return inserted

    def to_dataframe(self) -> pd.DataFrame:
        """Every row, JSON columns decoded, oldest first."""
        frame = pd.read_sql_query("SELECT * FROM results ORDER BY created_at, key", self._connection)
        for column in JSON_COLUMNS:
            frame[column] = frame[column].map(json.loads)
        return frame


def load_results(path: str | Path = DEFAULT_STORE) -> pd.DataFrame:
    """The store at ``path`` as a pandas DataFrame (one row per job)."""
    with ResultStore(path) as store:
        return store.to_dataframe()


def result_row(result: EvalResult, fp32_reward: float | None) -> dict[str, Any]:
    job, spec = result.job, result.job.spec
    rewards = result.episode_rewards
    return {
        "key": job.key,
        "reference_key": job.reference().key,
        "algo": job.algo,
        "env_id": job.env_id,
        "method": spec.method,
        "precision": spec.precision,
        "bits": spec.bits,
        "granularity": spec.granularity,
        "symmetric": int(spec.symmetric),
        "quantize_bias": int(spec.quantize_bias),
        "seed": job.seed,
        "episodes": job.episodes,
        "n_envs": job.n_envs,
        "deterministic": int(job.deterministic),
        "agent_hash": job.agent_hash,
        "agent_source": result.provenance.get("agent_source"),
        "agent_path": result.provenance.get("agent_path"),
        "mean_reward": result.mean_reward,
        "std_reward": result.std_reward,
        "min_reward": min(rewards),
        "max_reward": max(rewards),
        "fp32_reward": fp32_reward,
        "error_pct": None if fp32_reward is None else relative_error(fp32_reward, result.mean_reward),
        "total_steps": sum(result.episode_lengths),
        "wall_seconds": result.wall_seconds,
        "episode_rewards": json.dumps(list(rewards)),
        "episode_lengths": json.dumps(list(result.episode_lengths)),
        "layers": json.dumps([asdict(layer) for layer in result.layers]),
        "agreement": json.dumps(result.action_agreement),
        "provenance": json.dumps(result.provenance),
        "weights": json.dumps(result.weights),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
    }


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    for column in JSON_COLUMNS:
        row[column] = json.loads(row[column])
    return row
