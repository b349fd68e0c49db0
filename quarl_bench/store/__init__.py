"""The results store: one SQLite row per job, keyed by the job's identity hash.

Rows hold what was measured, never derived numbers: E% and the fp32 reward are joined from the reference row
(``reference_key``) at query time, in ``store_schema.SELECT_ROWS``, the one place they are computed. Tables and plots select
an explicit :class:`Variant` through :meth:`ResultStore.select`, so a row of another seed, episode count, grid or
layer mode never fills a cell.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pandas as pd

from quarl_bench.errors import QuarlError
from quarl_bench.precision import names as precision_names
from quarl_bench.store.agent_names import row_agent_name
from quarl_bench.store.migration import fill_spec_json
from quarl_bench.store.schema import (
    COLUMNS,
    FIDELITY_JSON_COLUMNS,
    FIDELITY_SCHEMA,
    HARDENED_JSON_COLUMNS,
    HARDENED_SCHEMA,
    JSON_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    SELECT_ROWS,
    TIMING_JSON_COLUMNS,
    TIMINGS_SCHEMA,
    VERDICT_JSON_COLUMNS,
    VERDICTS_SCHEMA,
)
from quarl_bench.store.variant import Variant
from quarl_bench.types import EvalResult

__all__ = ["DEFAULT_STORE", "ResultStore", "Variant", "check_store_file", "result_row"]

DEFAULT_STORE = Path("results/quarl.sqlite")
# checked names, not SQL input
SIDE_TABLES = {"fidelity": "fidelity", "verdicts": "verdicts", "timings": "timings", "hardened": "hardened"}
SIDE_JSON_COLUMNS = {
    "fidelity": FIDELITY_JSON_COLUMNS,
    "verdicts": VERDICT_JSON_COLUMNS,
    "timings": TIMING_JSON_COLUMNS,
    "hardened": HARDENED_JSON_COLUMNS,
}
OPEN_TIMEOUT_S, WRITE_TIMEOUT_S = 5.0, 60


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    """Check the schema version, switch to WAL, create or migrate the schema, and set the writers' busy timeout.

    :raises QuarlError: for a store from a newer schema (never modified).
    """
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise QuarlError(
            f"results store {str(path)!r} has schema version {version}, newer than this quarl-bench "
            f"reads ({SCHEMA_VERSION}): upgrade quarl-bench or pass another --store"
        )
    if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        db.execute("PRAGMA journal_mode=WAL")
    if version < SCHEMA_VERSION:
        with db:
            db.execute("BEGIN IMMEDIATE")
            if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:  # not done meanwhile by another
                db.execute(SCHEMA)
                db.execute(TIMINGS_SCHEMA)
                db.execute(FIDELITY_SCHEMA)
                db.execute(VERDICTS_SCHEMA)
                db.execute(HARDENED_SCHEMA)
                _add_missing_columns(db)
                fill_spec_json(db)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.execute(f"PRAGMA busy_timeout={WRITE_TIMEOUT_S * 1000}")  # writers of a sweep queue up


class ResultStore:
    """Embedded SQLite store, WAL mode so several processes can write; each write is one transaction."""

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_STORE) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._names: tuple[int, dict[str, str]] | None = None  # agent_names() and the row count it was read at

    @property
    def _connection(self) -> sqlite3.Connection:
        """Opened (and the file created) on first use, so a command that fails early leaves no file behind.

        :raises QuarlError: for a file that is not an SQLite database, a locked one, or one from a newer schema;
            such a file is never modified.
        """
        if self._db is None:
            check_store_file(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # a short wait while opening: a store locked by another program fails in seconds, not a minute
            deadline = time.monotonic() + OPEN_TIMEOUT_S
            while True:
                db = sqlite3.connect(self.path, timeout=OPEN_TIMEOUT_S, isolation_level=None)
                try:
                    _prepare(db, self.path)
                    break
                except sqlite3.OperationalError as error:
                    db.close()
                    # SQLite answers "locked" at once, without waiting, when two processes create or migrate the
                    # same new file together (the switch to WAL, the schema's write lock): try again shortly
                    if "locked" in str(error) and time.monotonic() < deadline:
                        time.sleep(0.05 + 0.05 * random.random())
                        continue
                    raise QuarlError(
                        f"results store {str(self.path)!r} cannot be opened: {error}; "
                        "is another process holding it? pass another --store"
                    ) from error
                except sqlite3.DatabaseError as error:  # "file is not a database": its first read, nothing written
                    db.close()
                    raise not_a_database(self.path) from error
                except QuarlError:
                    db.close()
                    raise
            self._db = db
        return self._db

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

    def check(self) -> None:
        """Refuse a bad existing store file now (see ``_connection``), before a command fetches or trains anything."""
        if self._readable():
            self._connection  # noqa: B018 - opening it is the check

    def has(self, key: str) -> bool:
        if not self._readable():
            return False
        return self._connection.execute("SELECT 1 FROM results WHERE key = ?", (key,)).fetchone() is not None

    def stored(self, key: str) -> dict[str, Any]:
        """The stored row of a job the caller knows is stored (it was just written or skipped as stored).

        :raises QuarlError: naming the key when the store lacks it.
        """
        row = self.get(key)
        if row is None:
            raise QuarlError(f"job {key} is not in {self.path}: expected a stored row")
        return row

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored row of a job as a dict (JSON columns decoded, E% joined), or None."""
        if not self._readable():
            return None
        cursor = self._connection.execute(SELECT_ROWS + " WHERE r.key = ?", (key,))
        row = cursor.fetchone()
        if row is None:
            return None
        return _decode(dict(zip([c[0] for c in cursor.description], row, strict=True)))

    def put(self, result: EvalResult, replace: bool = False) -> bool:
        """Write one job's row atomically; returns False (and writes nothing) if it exists and not ``replace``."""
        row = result_row(result)
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        sql = f"{verb} INTO results ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})"
        db = self._connection
        with db:  # one transaction: a crash leaves the old state or the whole row
            inserted = db.execute(sql, tuple(row.values())).rowcount > 0
        return inserted

    def put_timing(self, row: dict[str, Any], replace: bool = False) -> bool:
        """Write one timing row (see :mod:`quarl_bench.deploy.synthetic`) atomically; False if it exists."""
        return self._put_side_row("timings", TIMING_JSON_COLUMNS, row, replace)

    def timings(self) -> pd.DataFrame:
        """Every timing row, JSON columns decoded, oldest first."""
        return self._side_table("timings", TIMING_JSON_COLUMNS)

    def _put_side_row(self, table: str, json_columns: tuple[str, ...], row: dict[str, Any], replace: bool) -> bool:
        values = {k: json.dumps(v) if k in json_columns else v for k, v in row.items()}
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        sql = f"{verb} INTO {table} ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})"
        with self._connection as db:
            return db.execute(sql, tuple(values.values())).rowcount > 0

    def _side_table(self, table: str, json_columns: tuple[str, ...]) -> pd.DataFrame:
        if not self._readable():
            return pd.DataFrame()
        frame = pd.read_sql_query(f"SELECT * FROM {table} ORDER BY created_at, key", self._connection)
        for column in json_columns:
            frame[column] = frame[column].map(json.loads)
        return frame

    def fidelity(self) -> pd.DataFrame:
        """Every fidelity row, JSON columns decoded, oldest first."""
        return self._side_table("fidelity", FIDELITY_JSON_COLUMNS)

    def has_in(self, table: str, key: str) -> bool:
        """Whether ``table`` (``results`` or a side table) holds ``key``."""
        return self.has(key) if table == "results" else self.has_side_row(table, key)

    def get_in(self, table: str, key: str) -> dict[str, Any] | None:
        """The row of ``key`` in ``table`` (``results``: as :meth:`get`, E% joined), or None."""
        return self.get(key) if table == "results" else self.get_side_row(table, key)

    def has_side_row(self, table: str, key: str) -> bool:
        """Whether a side table (``fidelity``, ``verdicts``, ``timings``) holds ``key``."""
        if not self._readable():
            return False
        return (
            self._connection.execute(f"SELECT 1 FROM {SIDE_TABLES[table]} WHERE key = ?", (key,)).fetchone() is not None
        )

    def put_side_row(self, table: str, row: dict[str, Any], replace: bool = False) -> bool:
        """Write one row of a side table atomically; False if it exists and not ``replace``."""
        return self._put_side_row(SIDE_TABLES[table], SIDE_JSON_COLUMNS[table], row, replace)

    def get_side_row(self, table: str, key: str) -> dict[str, Any] | None:
        """A side table's row (JSON columns decoded), or None."""
        if not self._readable():
            return None
        cursor = self._connection.execute(f"SELECT * FROM {SIDE_TABLES[table]} WHERE key = ?", (key,))
        row = cursor.fetchone()
        if row is None:
            return None
        found = dict(zip([c[0] for c in cursor.description], row, strict=True))
        return found | {column: json.loads(found[column]) for column in SIDE_JSON_COLUMNS[table]}

    def put_verdict(self, row: dict[str, Any], replace: bool = False) -> bool:
        """Write one certified verdict (see :mod:`quarl_bench.certify.plan`) atomically; False if it exists."""
        return self._put_side_row("verdicts", VERDICT_JSON_COLUMNS, row, replace)

    def get_verdict(self, key: str) -> dict[str, Any] | None:
        """A stored verdict (JSON columns decoded), or None."""
        return self.get_side_row("verdicts", key)

    def verdicts(self) -> pd.DataFrame:
        """Every certified verdict, JSON columns decoded, oldest first, with its agent's name (``agent``)."""
        verdicts = self._side_table("verdicts", VERDICT_JSON_COLUMNS)
        if len(verdicts):
            names = self.agent_names()
            verdicts["agent"] = [names.get(h, str(h)[:8]) for h in verdicts["agent_hash"]]
        return verdicts

    def hardened(self) -> pd.DataFrame:
        """Every hardened agent (``methods/harden.py``), JSON columns decoded, oldest first."""
        return self._side_table("hardened", HARDENED_JSON_COLUMNS)

    def agent_names(self) -> dict[str, str]:
        """agent hash -> the agent as a person knows it (:func:`~quarl_bench.store.agent_names.row_agent_name`)."""
        count = self._connection.execute("SELECT COUNT(*) FROM results").fetchone()[0]  # other processes write too
        if self._names is not None and self._names[0] == count:
            return self._names[1]
        query = "SELECT algo, env_id, agent_source, agent_path, agent_hash, provenance FROM results GROUP BY agent_hash"
        names = {}
        for algo, env_id, source, path, agent_hash, provenance in self._connection.execute(query).fetchall():
            row = {"algo": algo, "env_id": env_id, "agent_source": source, "agent_path": path}
            names[agent_hash] = row_agent_name(row | {"agent_hash": agent_hash, "provenance": json.loads(provenance)})
        self._names = (count, names)
        return names

    def unpaired_rows(self, agent_hash: str) -> int:
        """How many of an agent's rows were stored before episode identities (they never pair with new rows)."""
        if not self._readable():
            return 0
        query = "SELECT COUNT(*) FROM results WHERE agent_hash = ? AND episode_ids = '[]' AND method != 'actorq'"
        return int(self._connection.execute(query, (agent_hash,)).fetchone()[0])

    def has_timing(self, key: str) -> bool:
        if not self._readable():
            return False
        return self._connection.execute("SELECT 1 FROM timings WHERE key = ?", (key,)).fetchone() is not None

    def to_dataframe(self) -> pd.DataFrame:
        """Every row, JSON columns decoded, E% joined from its reference row, oldest first."""
        return self._frame(SELECT_ROWS + " ORDER BY r.created_at, r.key", ())

    def select(
        self, variant: Variant | None = None, algo: str | None = None, env_id: str | None = None
    ) -> pd.DataFrame:
        """The rows of exactly one variant (default: seed 0, 100 episodes, the default spec, PTQ), with E% joined.

        Several agents (content hashes) of one algo/env stay separate rows: group by ``reference_key`` for cells.
        """
        variant = variant or Variant()
        floats = ", ".join(f"'{p}'" for p in precision_names("float"))
        where = [
            "r.method = :method",
            "r.seed = :seed",
            "r.episodes = :episodes",
            "r.quantizer_version = :quantizer_version",
            f"(r.precision IN ({floats}) OR (r.granularity = :granularity AND r.symmetric = :symmetric"
            " AND r.quantize_bias = :quantize_bias))",
            "(r.precision = 'fp32' OR r.layer_mode = :layers)",
            "r.layer_bits = ''",
            "r.obs_noise = :obs_noise",
            "r.perturbation = :perturbation",
            "r.judge = :judge",
            # the reference is the plain fp32 row; a pruned fp32 row belongs to its recipe's frontier, not here
            "((r.precision = 'fp32' AND r.recipe = '') OR (r.precision != 'fp32' AND r.recipe = :recipe))",
        ]
        params: dict[str, Any] = asdict(variant)
        params["symmetric"], params["quantize_bias"] = int(variant.symmetric), int(variant.quantize_bias)
        for column, value in (("algo", algo), ("env_id", env_id)):
            if value is not None:
                where.append(f"r.{column} = :{column}")
                params[column] = value
        frame = self._frame(SELECT_ROWS + " WHERE " + " AND ".join(where) + " ORDER BY r.created_at, r.key", params)
        if not variant.question or frame.empty:
            return frame
        from quarl_bench.store.question import VARIANT_AXES, with_questions

        # a parted variant: its question's rows, and the reference rows they name
        quantized = frame[frame["key"] != frame["reference_key"]]
        keys = with_questions(quantized, over=VARIANT_AXES, column="variant")
        own = quantized[(keys["variant"] == variant.question).to_numpy()]
        return frame[frame["key"].isin(own["key"]) | frame["key"].isin(own["reference_key"])]

    def variants(self, method: str = "ptq") -> list[Variant]:
        """Every variant with at least one quantized (non-fp32) row of ``method`` (``deploy``: any row, since an
        ``ort-fp32`` artifact is a deployment too); the default first."""
        if not self._readable():
            return []
        names = (
            "seed",
            "episodes",
            "granularity",
            "symmetric",
            "quantize_bias",
            "layer_mode",
            "quantizer_version",
            "obs_noise",
            "recipe",
            "perturbation",
            "judge",
        )
        rows = self._connection.execute(
            f"SELECT DISTINCT {', '.join(names)} FROM results WHERE method = ? AND (precision != 'fp32' OR "
            "method = 'deploy') AND layer_bits = ''",
            (method,),
        ).fetchall()
        columns = [column.name for column in fields(Variant)][1:-2]  # the names above, in Variant's order
        found = {Variant(method, **dict(zip(columns, row, strict=True))) for row in rows}
        split = [part for variant in found for part in self._parted(variant)]
        return sorted(split, key=lambda v: (not v.is_default, v.label()))

    def _parted(self, variant: Variant) -> list[Variant]:
        """``variant``, or one variant per question its rows hold where its own fields leave two together (the
        question derived from every field of the job, less agent and precision: store/question.py), each named by
        what sets it apart."""
        from dataclasses import replace as changed

        from quarl_bench.store.question import VARIANT_AXES, distinguishing_labels, with_questions

        rows = self.select(variant)
        quantized = rows[rows["key"] != rows["reference_key"]] if len(rows) else rows
        if quantized.empty:
            return [variant]
        quantized = with_questions(quantized, over=VARIANT_AXES, column="variant")
        if quantized["variant"].nunique() <= 1:
            return [variant]
        from quarl_bench.store.question import job_of_row, question_fields

        firsts = quantized.drop_duplicates("variant")
        questions = [question_fields(job_of_row(row), VARIANT_AXES) for row in firsts.to_dict("records")]
        labels = distinguishing_labels(questions)
        return [
            changed(variant, question=key, extra=label) for key, label in zip(firsts["variant"], labels, strict=True)
        ]

    def _frame(self, sql: str, params: Any) -> pd.DataFrame:
        frame = pd.read_sql_query(sql, self._connection, params=params)
        for column in JSON_COLUMNS:
            frame[column] = frame[column].map(json.loads)
        if "provenance" in frame.columns:  # results rows (not verdicts): the agent as a person knows it
            frame["agent"] = frame["agent_hash"].map(self.agent_names()) if len(frame) else []
        return frame


def check_store_file(path: Path) -> None:
    """Refuse a folder where a store should be. The file itself is never opened here: closing any descriptor of it
    drops every SQLite lock this process holds on it (POSIX locks are per process), after which another process's
    reader deletes the WAL under this process's open connections ("disk I/O error"). SQLite's own first read
    refuses a file that is no database (:func:`not_a_database`).

    :raises QuarlError: naming the folder and what is expected.
    """
    if path.is_dir():
        raise QuarlError(
            f"results store {str(path)!r} is a folder: expected an SQLite file such as results/quarl.sqlite"
        )


def not_a_database(path: Path) -> QuarlError:
    """The one-line refusal of a file SQLite cannot read as a database (left untouched: nothing was written)."""
    return QuarlError(
        f"results store {str(path)!r} is not an SQLite database: pass a quarl-bench store (.sqlite) or a new path"
    )


def _add_missing_columns(db: sqlite3.Connection) -> None:
    """Bring a store made by an older version up to the current schema (new columns only)."""
    have = {row[1] for row in db.execute("PRAGMA table_info(results)")}
    for column in COLUMNS:
        if column.added and column.name not in have:
            db.execute(f"ALTER TABLE results ADD COLUMN {column.name} {column.definition}")
    if "evidence" not in {row[1] for row in db.execute("PRAGMA table_info(verdicts)")}:
        db.execute("ALTER TABLE verdicts ADD COLUMN evidence TEXT NOT NULL DEFAULT '{}'")
    if "over_time" not in {row[1] for row in db.execute("PRAGMA table_info(fidelity)")}:
        db.execute("ALTER TABLE fidelity ADD COLUMN over_time TEXT NOT NULL DEFAULT '{}'")


def result_row(result: EvalResult) -> dict[str, Any]:
    """The row a result is stored as, one value per :data:`COLUMNS` entry."""
    return {column.name: column.value(result) for column in COLUMNS}


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    for column in JSON_COLUMNS:
        row[column] = json.loads(row[column])
    return row
