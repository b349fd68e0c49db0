"""What a question is, written once: a stored row's job rebuilt from its columns, and that job's identity less the
axes a table sums over (its precision, its seed). Every report table, figure, reuse and diff groups on
:func:`question_key` and names a question by :func:`question_labels`; none keeps a tuple of its own, so a field
added to :class:`~quarl_bench.types.Job` (or to the spec, the action mode, the deployed target) reaches every
table without an edit here.

A verdict's question (:func:`verdict_question`) is the same idea for the verdicts table: everything its key was
made of, less the precision.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

import pandas as pd

from quarl_bench.action_modes import ActionMode
from quarl_bench.store.spec_kinds import method_of, spec_of, target_of
from quarl_bench.types import QUANTIZER_VERSION, Job, QuantSpec

# The axes a table may sum over, each the identity's entries it removes. A table that sums over more than the
# default says so by naming the axis here (and shows that axis's values in a column of its own).
PRECISION, SEED, SPEC, LAYERS, AGENT, BACKEND = "precision", "seed", "spec", "layers", "agent", "backend"
DEFAULT_AXES = (PRECISION, SEED)
# what a reward-error or deployment table shows in its rows and columns (agents, precisions, the spec's grid and
# recipe, backends): a Variant is parted by what is left (store.ResultStore.variants)
VARIANT_AXES = (PRECISION, AGENT, SPEC, BACKEND)
# a spec's entries that only say which method played it: kept when the spec is summed over
_SPEC_KEPT = ("method", "backend")
# derived from the spec's fields: summed with it
_SPEC_DERIVED = ("calibration", "rounding", "deploy_calibration")
# shown in columns of their own: named in a label only where they tell one agent's questions apart
_SHOWN_ELSEWHERE = ("algo", "env_id", "agent_hash", "episodes", "n_envs")
# derived from the fields above (a condition's version, how draws are made): never a label's own part
_DERIVED = ("episode_starts", "draws", "perturbation_version", "calibration", "rounding", "deploy_calibration")
_ABSENT = "<absent>"


def distinguishing_labels(questions: list[dict[str, Any]]) -> list[str]:
    """Per question, only the fields in which these questions differ (``n_envs 4``, ``actions sampled``)."""
    flat = [_flatten(fields) for fields in questions]
    names = sorted({name for fields in flat for name in fields})
    varying = [
        name
        for name in names
        if name.split(".")[0] not in _DERIVED and len({repr(fields.get(name, _ABSENT)) for fields in flat}) > 1
    ]
    return [", ".join(_part(name, fields.get(name, "")) for name in varying) for fields in flat]


_NAMES = {
    "perturbation": "condition",
    "judge": "judged by",
    "obs_noise": "obs noise",
    "actions.kind": "actions",
    "actions.epsilon": "epsilon",
    "spec.method": "method",
    "spec.backend": "backend",
    "perturbation_version": "perturbation version",
}


def job_of_row(row: Mapping[str, Any]) -> Job:
    """The job a stored results row answers, from its own columns (its spec, method and target from
    ``spec_json``). ``job_of_row(result_row(r)).identity()`` is ``r.job.identity()``: a field a job gains and the
    store does not keep fails ``tests/test_question.py``."""
    spec_fields = row["spec_json"]
    spec_text = spec_fields if isinstance(spec_fields, str) else json.dumps(spec_fields, sort_keys=True)
    return _job(
        str(row["algo"]),
        str(row["env_id"]),
        spec_text,
        str(row["agent_hash"]),
        int(row["episodes"]),
        int(row["seed"]),
        int(row["n_envs"]),
        str(row.get("action_mode") or "deterministic"),
        float(row.get("epsilon") or 0.0),
        str(row.get("setting") or ""),
        float(row.get("obs_noise") or 0.0),
        str(row.get("perturbation") or ""),
        str(row.get("judge") or ""),
    )


@lru_cache(maxsize=65536)
def _job(
    algo: str,
    env_id: str,
    spec_text: str,
    agent_hash: str,
    episodes: int,
    seed: int,
    n_envs: int,
    action_mode: str,
    epsilon: float,
    setting: str,
    obs_noise: float,
    perturbation: str,
    judge: str,
) -> Job:
    target = target_of(spec_text)
    job = Job(
        algo,
        env_id,
        spec_of(spec_text) if target is None else QuantSpec(target.precision),
        agent_hash,
        episodes,
        seed,
        n_envs,
        ActionMode(action_mode, epsilon),
        setting=setting,
        obs_noise=obs_noise,
        perturbation=perturbation,
        judge=judge,
    )
    return replace(job, method=method_of(spec_text), target=target)


def question_fields(
    job: Job, over: Iterable[str] = DEFAULT_AXES, quantizer_version: int = QUANTIZER_VERSION
) -> dict[str, Any]:
    """``job``'s identity (its key's fields) less the axes in ``over``: what the question is.

    :param quantizer_version: the quantizer that made the row (a stored row's own, not today's).
    :raises KeyError: for an axis that is not one of :data:`PRECISION`, :data:`SEED`, :data:`SPEC`, :data:`LAYERS`.
    """
    fields = job.identity() | {"quantizer_version": quantizer_version}
    fields["spec"] = dict(fields["spec"])
    for axis in over:
        _SUMMED[axis](fields)
    return fields


def _sum_precision(fields: dict[str, Any]) -> None:
    fields["spec"].pop("precision")


def _sum_layers(fields: dict[str, Any]) -> None:
    """A per-layer allocation and its narrowest precision (sensitivity's heatmap sums over both)."""
    fields["spec"].pop("precision")
    fields["spec"].pop("layer_precisions", None)


def _sum_agent(fields: dict[str, Any]) -> None:
    """The agent and its env (a reward-error table's rows): what is asked of every agent alike remains."""
    for name in ("algo", "env_id", "agent_hash"):
        fields.pop(name)


def _sum_backend(fields: dict[str, Any]) -> None:
    """The deployed artifact: its backend, calibration and bytes (a deployment table's column)."""
    for name in ("backend", "artifact", "calibration_states", "calibration_method"):
        fields["spec"].pop(name, None)
    fields.pop("deploy_calibration", None)


def _sum_seed(fields: dict[str, Any]) -> None:
    fields.pop("seed")


def _sum_spec(fields: dict[str, Any]) -> None:
    fields["spec"] = {name: value for name, value in fields["spec"].items() if name in _SPEC_KEPT}
    for name in _SPEC_DERIVED:
        fields.pop(name, None)


_SUMMED = {
    PRECISION: _sum_precision,
    SEED: _sum_seed,
    SPEC: _sum_spec,
    LAYERS: _sum_layers,
    AGENT: _sum_agent,
    BACKEND: _sum_backend,
}


def question_key(job: Job, over: Iterable[str] = DEFAULT_AXES, quantizer_version: int = QUANTIZER_VERSION) -> str:
    """A stable hash of :func:`question_fields`: two rows are one question exactly when their keys are equal."""
    return _hash(question_fields(job, over, quantizer_version))


def with_questions(frame: pd.DataFrame, over: Iterable[str] = DEFAULT_AXES, column: str = "question") -> pd.DataFrame:
    """``frame`` (results rows) with each row's question key in ``column`` and its label in ``column label``."""
    over = tuple(over)
    if frame.empty:
        return frame.assign(**{column: pd.Series(dtype=str), f"{column} label": pd.Series(dtype=str)})
    records = frame.to_dict("records")
    jobs = [job_of_row(row) for row in records]
    versions = [int(row.get("quantizer_version") or QUANTIZER_VERSION) for row in records]
    fields = [question_fields(job, over, version) for job, version in zip(jobs, versions, strict=True)]
    labels = question_labels(fields)
    return frame.assign(**{column: [_hash(f) for f in fields], f"{column} label": labels})


def question_labels(questions: list[dict[str, Any]]) -> list[str]:
    """Per question (:func:`question_fields`), what sets it apart from the nominal question of its agent: its
    condition, judge, method, recipe, action mode, ...; a field shown in a column of its own (episodes, envs) only
    where one agent's questions differ in it. Two different questions of one agent never get one label."""
    flat = [_flatten(fields) for fields in questions]
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for fields in flat:
        by_agent.setdefault(str(fields.get("agent_hash")), []).append(fields)
    varying = {
        agent: {
            name
            for name in {name for fields in group for name in fields}
            if len({repr(fields.get(name, _ABSENT)) for fields in group}) > 1
        }
        for agent, group in by_agent.items()
    }
    labels = []
    for fields in flat:
        nominal = _nominal(fields)
        shown = varying.get(str(fields.get("agent_hash")), set())
        parts = []
        for name, value in fields.items():
            if name.split(".")[0] in _DERIVED:
                continue
            quiet = name.split(".")[0] in _SHOWN_ELSEWHERE
            if (quiet and name in shown) or (not quiet and (nominal.get(name, _ABSENT) != value or name in shown)):
                parts.append(_part(name, value))
        labels.append(", ".join(parts) or "nominal")
    return labels


@lru_cache(maxsize=1)
def _nominal_job() -> Job:
    return Job("", "", QuantSpec(), "")


def _nominal(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The nominal question's flattened fields (a default job: PTQ, nominal simulator, the env's own outcome)."""
    nominal = _flatten(_nominal_job().identity() | {"quantizer_version": QUANTIZER_VERSION})
    return {name: value for name, value in nominal.items() if name in flat}


def _flatten(fields: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, Mapping) and name in ("spec", "actions"):
            flat |= _flatten(value, f"{prefix}{name}.")
        else:
            flat[prefix + name] = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value
    return flat


def _part(name: str, value: Any) -> str:
    if name in ("perturbation", "settings.perturb") and value:
        return f"under {value}"
    label = _NAMES.get(name, name.removeprefix("spec.").replace("_", " "))
    if isinstance(value, bool):
        return label if value else f"no {label}"
    return f"{label} {value if value != '' else 'none'}"


def _hash(fields: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


# A verdict's question: every part of its key but the precision (verdict_key), read from the verdicts table's row.
def verdict_question_fields(
    row: Mapping[str, Any], across_specs: bool = False, measured: bool = True
) -> dict[str, Any]:
    """What a stored verdict answered, less its precision: the agent, the spec's other fields with the method that
    played it, the certification settings (outcome and its judge, condition, design, seed base, tolerance, α,
    baseline, a test's reference) and how many families shared α; with ``measured``, also δ as it was measured (a
    line of the report shows one δ; ``record diff`` compares δ as evidence, so it asks without). With
    ``across_specs``, the spec's fields are summed over but for the method that played it (the methods table's
    line, a method per column)."""
    spec = dict(row["spec_json"]) if isinstance(row["spec_json"], Mapping) else json.loads(row["spec_json"])
    spec.pop("precision", None)
    spec.pop("layer_precisions", None)
    if across_specs:  # every spec field is a column's (its method: the column's label names who played it)
        spec = {}
    found = row.get("evidence")
    evidence: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    asked = {
        "algo": row["algo"],
        "env_id": row["env_id"],
        "agent_hash": row["agent_hash"],
        "spec": spec,
        "settings": row["settings"],
        "alpha": float(row["alpha"]),
        "families": int(evidence.get("families") or 1),
    }
    return asked | ({"tolerance": row["tolerance"], "delta": round(float(row["delta"]), 9)} if measured else {})


def verdict_question(row: Mapping[str, Any], across_specs: bool = False, measured: bool = True) -> str:
    """A stored verdict's question key (:func:`verdict_question_fields`)."""
    return _hash(verdict_question_fields(row, across_specs, measured))


def with_verdict_questions(verdicts: pd.DataFrame, across_specs: bool = False) -> pd.DataFrame:
    """The verdicts table with each verdict's question key in ``question`` and, in ``question label``, what sets it
    apart from the agent's other verdict questions (its settings' fields that differ; ``-`` where it has one)."""
    if verdicts.empty:
        return verdicts.assign(question=pd.Series(dtype=str), **{"question label": pd.Series(dtype=str)})
    fields = [verdict_question_fields(row, across_specs) for row in verdicts.to_dict("records")]
    flat = [_flatten(f | {"settings": None}) | _flatten(f["settings"], "settings.") for f in fields]
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for one in flat:
        by_agent.setdefault(str(one["agent_hash"]), []).append(one)
    labels = []
    for one in flat:
        group = by_agent[str(one["agent_hash"])]
        names = sorted({name for other in group for name in other if name != "settings"})
        varying = [name for name in names if len({repr(other.get(name, _ABSENT)) for other in group}) > 1]
        parts = [_part(name.removeprefix("settings."), one.get(name, "none")) for name in varying]
        labels.append(", ".join(parts) or "-")
    return verdicts.assign(question=[_hash(f) for f in fields], **{"question label": labels})


def sibling_question(
    row: Mapping[str, Any], method: str, spec: QuantSpec | None = None, over: Iterable[str] = DEFAULT_AXES
) -> str:
    """The question a stored row's job asks when played by ``method`` (and with ``spec``; default: the plain fp32
    spec), all else the same: a uniform-random baseline's (``random``), a mixed allocation's uniform PTQ points,
    a deployed artifact's simulation (``ptq`` at its precision)."""
    job = replace(job_of_row(row), spec=spec or QuantSpec(), method=method, target=None)
    return question_key(job, tuple(over), int(row.get("quantizer_version") or QUANTIZER_VERSION))


def random_question(row: Mapping[str, Any]) -> str:
    """The question a uniform-random policy's rows answer beside a stored fp32 row: the same job, played by the
    ``random`` method (the 0 of normalised scores and of δ's scale)."""
    return sibling_question(row, "random")
