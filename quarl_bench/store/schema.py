"""The results store's tables, declared once: each results column with how a result fills it, the side tables
(timings, fidelity, verdicts), and the one query that joins E% from a row's reference row."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from quarl_bench.store.spec_kinds import spec_json
from quarl_bench.types import QUANTIZER_VERSION, EvalResult

SCHEMA_VERSION = 14  # PRAGMA user_version; 0/1: before layers, action modes, quantizer versions; 2: before backend;
# 3: before the timings table; 4: before the setting column; 5: before per-layer precisions, observation noise
# and the fidelity table; 6: before the recipe column; 7: before episode identities and the verdicts table;
# 8: before spec_json (store_migration.py fills it); 9: before the hardened table; 10: before verdicts' evidence;
# 11: before fidelity's over_time; 12: before episode_outcomes and perturbation; 13: before judge


@dataclass(frozen=True)
class Column:
    """One column of the results table: its SQL definition, whether older stores lack it (then ``ALTER TABLE``
    adds it with ``definition``'s default), and how a result fills it."""

    name: str
    definition: str
    value: Callable[[EvalResult], Any]
    added: bool = False


# The results table, declared once: CREATE, ALTER (columns added since the first schema) and row building come
# from this list.
COLUMNS = (
    Column("key", "TEXT PRIMARY KEY", lambda r: r.job.key),
    Column("reference_key", "TEXT NOT NULL", lambda r: r.job.reference().key),
    Column("algo", "TEXT NOT NULL", lambda r: r.job.algo),
    Column("env_id", "TEXT NOT NULL", lambda r: r.job.env_id),
    Column("method", "TEXT NOT NULL", lambda r: r.job.method),
    Column("precision", "TEXT NOT NULL", lambda r: r.job.spec.precision),
    Column("bits", "INTEGER NOT NULL", lambda r: r.job.spec.bits),
    Column("granularity", "TEXT NOT NULL", lambda r: r.job.spec.granularity),
    Column("symmetric", "INTEGER NOT NULL", lambda r: int(r.job.spec.symmetric)),
    Column("quantize_bias", "INTEGER NOT NULL", lambda r: int(r.job.spec.quantize_bias)),
    Column("layer_mode", "TEXT NOT NULL DEFAULT 'paper'", lambda r: r.job.spec.layers, added=True),
    Column("backend", "TEXT NOT NULL DEFAULT ''", lambda r: r.job.target.backend if r.job.target else "", added=True),
    Column("quantizer_version", "INTEGER NOT NULL DEFAULT 1", lambda r: QUANTIZER_VERSION, added=True),
    Column("seed", "INTEGER NOT NULL", lambda r: r.job.seed),
    Column("episodes", "INTEGER NOT NULL", lambda r: r.job.episodes),
    Column("n_envs", "INTEGER NOT NULL", lambda r: r.job.n_envs),
    Column("deterministic", "INTEGER NOT NULL", lambda r: int(r.job.deterministic)),
    Column("action_mode", "TEXT NOT NULL DEFAULT 'deterministic'", lambda r: r.job.actions.kind, added=True),
    Column("epsilon", "REAL NOT NULL DEFAULT 0", lambda r: r.job.actions.epsilon, added=True),
    Column("agent_hash", "TEXT NOT NULL", lambda r: r.job.agent_hash),
    Column("setting", "TEXT NOT NULL DEFAULT ''", lambda r: r.job.setting, added=True),
    Column(
        "layer_bits",
        "TEXT NOT NULL DEFAULT ''",
        lambda r: json.dumps(list(r.job.spec.layer_precisions)) if r.job.spec.layer_precisions else "",
        added=True,
    ),
    Column("obs_noise", "REAL NOT NULL DEFAULT 0", lambda r: r.job.obs_noise, added=True),
    # the condition the episodes were played under (evaluation/perturbations.py): '' = the nominal simulator
    Column("perturbation", "TEXT NOT NULL DEFAULT ''", lambda r: r.job.perturbation, added=True),
    # the user's function that decided each episode's success or progress (evaluation/judges.py): '' = the env's info
    Column("judge", "TEXT NOT NULL DEFAULT ''", lambda r: r.job.judge, added=True),
    # activations, groups, calibrated rounding, pruning (QuantSpec.recipe_label): '' for plain weight PTQ; a column
    # for queries (Variant); reports read the spec's fields from spec_json
    Column("recipe", "TEXT NOT NULL DEFAULT ''", lambda r: r.job.spec.recipe_label(), added=True),
    Column(
        "spec_json", "TEXT NOT NULL DEFAULT ''", lambda r: spec_json(r.job.spec, r.job.method, r.job.target), added=True
    ),
    Column("agent_source", "TEXT", lambda r: r.provenance.get("agent_source")),
    Column("agent_path", "TEXT", lambda r: r.provenance.get("agent_path")),
    Column("mean_reward", "REAL NOT NULL", lambda r: r.mean_reward),
    Column("std_reward", "REAL NOT NULL", lambda r: r.std_reward),
    Column("min_reward", "REAL NOT NULL", lambda r: min(r.episode_rewards)),
    Column("max_reward", "REAL NOT NULL", lambda r: max(r.episode_rewards)),
    Column("total_steps", "INTEGER NOT NULL", lambda r: sum(r.episode_lengths)),
    Column("wall_seconds", "REAL NOT NULL", lambda r: r.wall_seconds),
    Column("episode_rewards", "TEXT NOT NULL", lambda r: json.dumps(list(r.episode_rewards))),
    Column("episode_lengths", "TEXT NOT NULL", lambda r: json.dumps(list(r.episode_lengths))),
    Column("layers", "TEXT NOT NULL", lambda r: json.dumps([asdict(layer) for layer in r.layers])),
    Column("agreement", "TEXT NOT NULL", lambda r: json.dumps(r.action_agreement)),
    Column("provenance", "TEXT NOT NULL", lambda r: json.dumps(r.provenance)),
    Column("weights", "TEXT NOT NULL DEFAULT '{}'", lambda r: json.dumps(r.weights), added=True),
    # [[env index, episode number, reset seed], ...] in episode_rewards' order; [] in rows stored before
    Column(
        "episode_ids", "TEXT NOT NULL DEFAULT '[]'", lambda r: json.dumps([list(e) for e in r.episode_ids]), added=True
    ),
    # {outcome: [value per episode, in episode_rewards' order]} (evaluation/outcomes.py); {} in rows stored before
    Column(
        "episode_outcomes",
        "TEXT NOT NULL DEFAULT '{}'",
        lambda r: json.dumps({name: list(values) for name, values in r.episode_outcomes.items()}),
        added=True,
    ),
    Column("created_at", "TEXT NOT NULL", lambda r: datetime.now(timezone.utc).isoformat(timespec="microseconds")),
)
JSON_COLUMNS = (
    "spec_json",
    "episode_rewards",
    "episode_lengths",
    "layers",
    "agreement",
    "provenance",
    "weights",
    "episode_ids",
    "episode_outcomes",
)
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS results (\n    " + ",\n    ".join(f"{c.name} {c.definition}" for c in COLUMNS) + "\n)"
)
ROW_COLUMNS = tuple(column.name for column in COLUMNS)

# Latency/size measurements of synthetic policies (QuaRL Table 4): no agent, no episodes, so not results rows.
TIMINGS_SCHEMA = """
CREATE TABLE IF NOT EXISTS timings (
    key TEXT PRIMARY KEY,
    policy TEXT NOT NULL,
    hidden TEXT NOT NULL,
    backend TEXT NOT NULL,
    machine TEXT NOT NULL,
    threads INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    p50_ms REAL NOT NULL,
    p99_ms REAL NOT NULL,
    mean_ms REAL NOT NULL,
    batch64_obs_per_s REAL NOT NULL,
    artifact_bytes INTEGER NOT NULL,
    artifact_sha256 TEXT NOT NULL,
    peak_rss_mb REAL,
    provenance TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""
TIMING_JSON_COLUMNS = ("hidden", "provenance")
# Closed-loop fidelity (fidelity.py): per episode, where a quantized policy's trajectory parts from the fp32 one's.
FIDELITY_SCHEMA = """
CREATE TABLE IF NOT EXISTS fidelity (
    key TEXT PRIMARY KEY,
    job_key TEXT NOT NULL,
    algo TEXT NOT NULL,
    env_id TEXT NOT NULL,
    precision TEXT NOT NULL,
    agent_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    episodes INTEGER NOT NULL,
    threshold REAL NOT NULL,
    obs_noise REAL NOT NULL,
    first_action TEXT NOT NULL,
    first_obs TEXT NOT NULL,
    lengths TEXT NOT NULL,
    provenance TEXT NOT NULL,
    created_at TEXT NOT NULL,
    over_time TEXT NOT NULL DEFAULT '{}'
)
"""
FIDELITY_JSON_COLUMNS = ("first_action", "first_obs", "lengths", "provenance", "over_time")
# Certified verdicts (methods/certify.py): one per agent x spec x certification settings, naming its batch rows.
VERDICTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    algo TEXT NOT NULL,
    env_id TEXT NOT NULL,
    agent_hash TEXT NOT NULL,
    precision TEXT NOT NULL,
    spec TEXT NOT NULL,
    verdict TEXT NOT NULL,
    episodes INTEGER NOT NULL,
    mean REAL NOT NULL,
    lower REAL NOT NULL,
    upper REAL NOT NULL,
    delta REAL NOT NULL,
    alpha REAL NOT NULL,
    spec_json TEXT NOT NULL,
    tolerance TEXT NOT NULL,
    settings TEXT NOT NULL,
    rows TEXT NOT NULL,
    provenance TEXT NOT NULL,
    created_at TEXT NOT NULL,
    evidence TEXT NOT NULL DEFAULT '{}'
)
"""
VERDICT_JSON_COLUMNS = ("spec_json", "settings", "rows", "provenance", "evidence")
# Hardened agents (methods/harden.py): one per parent x target spec x recipe x budget x seed, linking the two hashes.
HARDENED_SCHEMA = """
CREATE TABLE IF NOT EXISTS hardened (
    key TEXT PRIMARY KEY,
    algo TEXT NOT NULL,
    env_id TEXT NOT NULL,
    agent_hash TEXT NOT NULL,
    parent_hash TEXT NOT NULL,
    recipe TEXT NOT NULL,
    settings TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    budget INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    env_steps INTEGER NOT NULL,
    gradient_steps INTEGER NOT NULL,
    seconds REAL NOT NULL,
    path TEXT NOT NULL,
    before TEXT NOT NULL,
    after TEXT NOT NULL,
    provenance TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""
HARDENED_JSON_COLUMNS = ("settings", "spec_json", "before", "after", "provenance")
# Every row with its reference (fp32) row's reward and E% = (R_fp32 - R_q) / |R_fp32| * 100, from that one row.
SELECT_ROWS = f"""
SELECT {", ".join("r." + c for c in ROW_COLUMNS)},
    ref.mean_reward AS fp32_reward,
    CASE WHEN r.key = r.reference_key OR ref.mean_reward IS NULL OR ref.mean_reward = 0 THEN NULL
         ELSE (ref.mean_reward - r.mean_reward) / abs(ref.mean_reward) * 100.0 END AS error_pct
FROM results r LEFT JOIN results ref ON ref.key = r.reference_key
"""
