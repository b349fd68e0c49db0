"""One identity for every question: a test that a new field cannot outrun.

The fields are enumerated from the dataclasses themselves (the job, its spec, its action mode, its deployed target;
a certification's settings), never from a list kept here. For each field, two jobs (or verdicts) that differ in it
alone are stored with their fp32 references, every report section is rendered, and no line or cell may hold both.
A field added later is enumerated too: it gets an alternative value from its type (a flag flipped, a number moved),
and only a text field whose values are constrained needs a line in ``ALTERNATIVES`` (the test fails naming it).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from quarl_bench.action_modes import ActionMode
from quarl_bench.certify.config import CertifyConfig
from quarl_bench.errors import QuarlError
from quarl_bench.report.objects import CELL_ROWS_SUFFIX, ROW_COLUMNS, Table, keys_in
from quarl_bench.report.writer import write_report
from quarl_bench.store import ResultStore
from quarl_bench.store.question import job_of_row, question_key
from quarl_bench.types import DeployTarget, EvalResult, Job, QuantSpec

PAPER = Path(__file__).resolve().parents[1] / "zoo_configs"
HASH_A, HASH_B = "a" * 64, "b" * 64
BASE = Job("dqn", "CartPole-v1", QuantSpec("int8"), HASH_A, episodes=6, seed=0, n_envs=2)
# the axes a table sums over: rows that differ only there are one question (shown in columns of their own)
SUMMED = {"seed", "spec.precision", "target.precision"}
# fields whose values are constrained: (what the base job needs first, the other value); a number or a flag gets
# its alternative from its type. FORCES: what the other value brings with it (a deployed artifact is deploy's).
ALTERNATIVES: dict[str, tuple[dict[str, Any], Any]] = {
    "algo": ({}, "qrdqn"),
    "env_id": ({}, "Acrobot-v1"),
    "agent_hash": ({}, HASH_B),
    "setting": ({}, "an actorq setting"),
    "method": ({}, "qat"),
    "perturbation": ({}, "action-noise=0.5"),
    "judge": ({}, "success=judge.py:ok@0123456789ab"),
    "target": ({}, DeployTarget("ort-int8-static", "int8", 100, "minmax")),
    "spec.precision": ({}, "int4"),
    "target.precision": ({"method": "deploy", "target": DeployTarget("ort-fp32", "fp32")}, "fp16"),
    "spec.granularity": ({}, "per-channel"),
    "spec.layers": ({}, "quarl-code"),
    "spec.calibration_states": ({"spec.act_bits": "8"}, 500),
    "spec.calibration_method": ({"spec.act_bits": "8"}, "percentile"),
    "spec.layer_precisions": ({}, ("int8", "int4")),
    "spec.act_bits": ({}, "8"),
    "spec.obs_bits": ({}, "6"),
    "spec.out_bits": ({}, "8"),
    "spec.state_bits": ({}, "8"),
    "spec.norm_bits": ({}, "8"),
    "spec.softmax_bits": ({}, "8"),
    "spec.group_size": ({}, 32),
    "spec.ptq": ({}, "gptq"),
    "spec.prune_structure": ({"spec.prune": 0.5}, "neurons"),
    "actions.kind": ({}, "sampled"),
    "actions.epsilon": ({"actions.kind": "epsilon-greedy"}, 0.2),
    "target.backend": ({"method": "deploy", "target": DeployTarget("ort-fp32", "fp32")}, "ort-fp16"),
    "target.calibration_states": (
        {"method": "deploy", "target": DeployTarget("ort-int8-static", "int8", 100, "minmax")},
        200,
    ),
    "target.calibration_method": (
        {"method": "deploy", "target": DeployTarget("ort-int8-static", "int8", 100, "minmax")},
        "entropy",
    ),
}
FORCES: dict[str, dict[str, Any]] = {"target": {"method": "deploy"}}
NESTED = {"spec": QuantSpec, "actions": ActionMode, "target": DeployTarget}


def leaf_fields(cls: type, prefix: str = "") -> list[str]:
    """Every field of ``cls`` and of the value types it holds, dotted (``spec.granularity``), from the dataclasses."""
    names = []
    for found in dataclasses.fields(cls):
        name = prefix + found.name
        names.append(name)
        if not prefix and found.name in NESTED:
            names += leaf_fields(NESTED[found.name], name + ".")
    return names


def with_field(job: Job, name: str, value: Any) -> Job:
    """``job`` with one (dotted) field set; the value types normalise and validate as they are made."""
    top, _, inner = name.partition(".")
    if not inner:
        return dataclasses.replace(job, **{top: value})
    holder = getattr(job, top)
    if holder is None:
        raise AssertionError(f"{name}: the base job has no {top}; give it one in ALTERNATIVES")
    changed = dataclasses.replace(holder, **{inner: value})
    return dataclasses.replace(job, **{top: changed})


def value_of(job: Job, name: str) -> Any:
    holder: Any = job
    for part in name.split("."):
        holder = getattr(holder, part)
    return holder


def automatic(value: Any) -> Any:
    """Another value of ``value``'s type: a flag flipped, a number moved, a text replaced (by one that passes for a
    hash too)."""
    if isinstance(value, str):
        return "0123456789abcdef" * 4
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.25
    raise AssertionError(f"no automatic alternative to {value!r}")


def pair_for(name: str) -> tuple[Job, Job]:
    """Two valid jobs that differ in ``name`` (and what that field's value forces) alone."""
    needs, other = ALTERNATIVES.get(name, ({}, None))
    base = BASE
    if name.startswith("target.") and "target" not in needs:  # a deployed target's field: a base that has one
        base = dataclasses.replace(base, method="deploy", target=DeployTarget("ort-fp32", "fp32"))
    for field, value in needs.items():
        base = with_field(base, field, value)
    try:
        changed = with_field(base, name, other if name in ALTERNATIVES else automatic(value_of(base, name)))
    except (AssertionError, QuarlError) as error:
        raise AssertionError(f"{name}: {error}; give it a line in ALTERNATIVES") from error
    for field, value in FORCES.get(name, {}).items():
        changed = with_field(changed, field, value)
    assert changed.identity() != base.identity(), f"{name}: the alternative normalises away; fix ALTERNATIVES"
    return base, changed


# a value type's own field is covered by its leaves, unless the job may hold none of it (a target)
JOB_FIELDS = [name for name in leaf_fields(Job) if name not in NESTED or getattr(BASE, name) is None]


def result(job: Job, level: float) -> EvalResult:
    rewards = tuple(level + i for i in range(job.episodes))
    ids = tuple((i % job.n_envs, i // job.n_envs, 1000 * job.seed + i) for i in range(job.episodes))
    provenance = {"agent_source": "folder", "agent_path": f"/zoo/{job.algo}/{job.env_id}_1"}
    if job.target is not None:  # what a deployed artifact's row records of it
        latency = {"p50_ms": 1.0, "p99_ms": 2.0}
        provenance["deployment"] = {"artifact_bytes": 1000, "peak_rss_mb": 1.0, "latency": latency}
    return EvalResult(job, rewards, (10,) * job.episodes, 0.1, provenance=provenance, episode_ids=ids)


@pytest.mark.parametrize("name", JOB_FIELDS)
def test_every_field_of_a_job_is_stored_and_read_back(tmp_path: Path, name: str) -> None:
    """The question is derived from the row's own columns: a field the store does not keep would be lost here."""
    _, changed = pair_for(name)
    with ResultStore(tmp_path / "s.sqlite") as store:
        store.put(result(changed, 1.0))
        row = store.get(changed.key)
    assert row is not None
    assert job_of_row(row).identity() == changed.identity()


@pytest.mark.parametrize("name", JOB_FIELDS)
def test_a_question_is_every_field_but_the_axes_tables_sum_over(name: str) -> None:
    base, changed = pair_for(name)
    same = question_key(base) == question_key(changed)
    assert same == (name in SUMMED), name


def stored_pair(tmp_path: Path, base: Job, changed: Job) -> tuple[ResultStore, list[tuple[str, str]]]:
    """A store with both jobs and their fp32 references, each pair of questions at its own reward level."""
    store = ResultStore(tmp_path / "s.sqlite")
    for job, level in ((base, 100.0), (changed, 50.0)):
        store.put(result(job, level))
        store.put(result(job.reference(), level + 1))
    pairs = [(base.key, changed.key)]
    if base.reference().key != changed.reference().key:
        pairs.append((base.reference().key, changed.reference().key))
    return store, pairs


def merged_cells(items: list[Any], pairs: list[tuple[str, str]]) -> list[str]:
    """Every table line (its line-wide row columns) or cell (an ``X rows`` column) that names both keys of a pair."""
    found = []
    for item in items:
        if not isinstance(item, Table) or item.frame.empty:
            continue
        line_columns = [c for c in item.frame.columns if c in ROW_COLUMNS]
        cell_columns = [c for c in item.frame.columns if str(c).endswith(CELL_ROWS_SUFFIX)]
        for index, line in item.frame.iterrows():
            groups = [keys_in(line[c] for c in line_columns)] + [keys_in([line[c]]) for c in cell_columns]
            if not line_columns and not cell_columns:  # no row columns: every text cell of the line
                groups.append(keys_in(str(v) for v in line.values))
            for keys in groups:
                for a, b in pairs:
                    if a in keys and b in keys:
                        found.append(f"{item.name} line {index}")
    return found


@pytest.mark.parametrize("name", [n for n in JOB_FIELDS if n not in SUMMED])
def test_no_report_table_puts_two_questions_in_one_line(tmp_path: Path, name: str) -> None:
    base, changed = pair_for(name)
    store, pairs = stored_pair(tmp_path, base, changed)
    with store:
        report = write_report(store, tmp_path / "report", PAPER, formats=(), figure_workers=0, all_files=False)
    assert merged_cells(report.items, pairs) == [], name
    # the statistics tables show both questions, each apart (a per-layer allocation: sensitivity's, one layer each)
    if base.method == changed.method == "ptq" and not changed.spec.layer_precisions:
        tables = [item for item in report.items if isinstance(item, Table) and item.name == "reward_statistics"]
        shown = {key for table in tables for key in table.row_keys}
        assert {base.key, changed.key} <= shown, name


def test_a_perturbed_run_never_replaces_the_nominal_one(tmp_path: Path) -> None:
    """The review's case: dqn CartPole nominal and under action-noise=0.5, each at int8 and int4 with fp32."""
    nominal = dataclasses.replace(BASE, episodes=30)
    perturbed = dataclasses.replace(nominal, perturbation="action-noise=0.5")
    with ResultStore(tmp_path / "s.sqlite") as store:
        for job, level in ((nominal, 500.0), (perturbed, 67.0)):
            for spec in ("fp32", "int8", "int4"):
                store.put(result(dataclasses.replace(job, spec=QuantSpec(spec)), level - (spec == "int4") * 40))
        report = write_report(store, tmp_path / "report", PAPER, formats=(), figure_workers=0, all_files=False)
    tables = {item.name: item.frame for item in report.items if isinstance(item, Table)}
    statistics = tables["reward_statistics"]
    fp32 = statistics[statistics["precision"] == "fp32"].set_index("condition")["IQM"]
    assert len(fp32) == 2 and fp32.min() < 100 < fp32.max()  # both fp32 references, apart
    assert set(tables["minimum_safe_bits"]["condition"]) == {"nominal", "under action-noise=0.5"}


# ---- verdicts: a certification's settings, enumerated from CertifyConfig ------------------------------------------

CONFIG_ALTERNATIVES: dict[str, Any] = {
    "guarantee": "asymptotic",
    "return_bounds": (0.0, 600.0),
    "outcome": "success",
    "success": "terminated",
    "progress": "judge.py:progress@0123456789ab",
    "perturb": "action-noise=0.2",
    "tolerance_abs": 10.0,
    "confidence": 0.9,
    "catastrophe": 50.0,
    "max_catastrophe_rate": 0.1,
}
CONFIG_NEEDS: dict[str, dict[str, Any]] = {"success": {"outcome": "success", "tolerance_abs": 0.1}}
CONFIG_NEEDS["progress"] = {"outcome": "progress", "tolerance_abs": 0.1}
CONFIG_FIELDS = [f.name for f in dataclasses.fields(CertifyConfig) if f.name in CertifyConfig().identity()]


def config_pair(name: str) -> tuple[CertifyConfig, CertifyConfig]:
    base = CertifyConfig(**CONFIG_NEEDS.get(name, {}))
    value = CONFIG_ALTERNATIVES[name] if name in CONFIG_ALTERNATIVES else automatic(getattr(base, name))
    changed = dataclasses.replace(base, **{name: value})
    assert changed.identity() != base.identity(), f"{name}: give it a line in CONFIG_ALTERNATIVES"
    return base, changed


def verdict_rows(config: CertifyConfig, batch_key: str) -> list[dict[str, Any]]:
    """A stored int8 and int4 verdict of one certification, each naming its own batch row."""
    from quarl_bench.certify.driver import verdict_row
    from quarl_bench.certify.plan import Question, verdict_key
    from quarl_bench.certify.result import Verdict
    from quarl_bench.types import AgentRef

    ref = AgentRef("dqn", "CartPole-v1", "CartPole-v1", "folder", "/zoo/dqn/CartPole-v1_1", HASH_A)
    rows = []
    for precision, answer in (("int8", "safe"), ("int4", "unsafe")):
        spec = QuantSpec(precision)
        key = verdict_key(ref, spec, config, 23.9)
        evidence = {"guarantee": "finite-sample", "alpha_test": 0.04, "families": 1, "delta_low": 20.0}
        found = Verdict(
            precision, precision, answer, 40, 0.0, -10.0, 10.0, 23.9, config.alpha, (batch_key,), False, key
        )
        found = dataclasses.replace(found, evidence=evidence)
        rows.append(verdict_row(found, ref, Question(spec), config, "5% of (R_fp32 - R_random)", {}))
    return rows


@pytest.mark.parametrize("name", CONFIG_FIELDS)
def test_no_verdict_table_or_record_puts_two_certifications_in_one_line(tmp_path: Path, name: str) -> None:
    from quarl_bench.api.record_diff import diff_records, tidy_record

    base, changed = config_pair(name)
    keys = ("1" * 24, "2" * 24)
    with ResultStore(tmp_path / "s.sqlite") as store:
        rows = verdict_rows(base, keys[0]) + verdict_rows(changed, keys[1])
        assert len({row["key"] for row in rows}) == 4, name
        for row in rows:
            store.put_verdict(row)
        report = write_report(store, tmp_path / "report", PAPER, formats=(), figure_workers=0, all_files=False)
        tidy = tidy_record(store.verdicts())
    assert merged_cells(report.items, [keys]) == [], name
    assert len(tidy.drop_duplicates(["question", "spec"])) == 4, name  # the record keeps four answers apart
    diff = diff_records(tidy, tidy)
    assert diff.changed.empty and diff.identical == 4, name


def test_certify_json_says_what_the_console_says(cli, zoo: Path, tmp_path: Path) -> None:
    """Per verdict: method and recipe, outcome and judge, condition, design, families and α per test, δ with its
    bounds, pairs and both interval ends (each a field of the verdict's settings or evidence)."""
    code, out, err = cli(
        "certify",
        *("--algo", "dqn", "--env", "CartPole-v1", "-f", zoo, "--bits", "8", "--batch", "10"),
        *("--max-episodes", "10", "--perturb", "action-noise=0.05", "--store", tmp_path / "s.sqlite", "--json"),
    )
    assert code in (0, 1), err
    answer = json.loads(out.strip().splitlines()[-1])
    verdict = answer["verdicts"][0]
    for name in ("method", "recipe", "outcome", "judge", "condition", "design", "families", "alpha_test"):
        assert name in verdict, name
    for name in ("delta", "delta_low", "delta_high", "episodes", "mean", "lower", "upper"):
        assert isinstance(verdict[name], float | int), name
    assert verdict["condition"] == "action-noise=0.05" and verdict["design"] == "paired"


def test_rows_a_variant_s_fields_do_not_name_are_parted_into_variants_of_their_own(tmp_path: Path) -> None:
    """Two runs that differ in their env count (a field Variant does not name) give two reward-error tables,
    each labelled by what sets it apart, each with its own rows and their own fp32."""
    runs = [BASE, dataclasses.replace(BASE, n_envs=3)]
    with ResultStore(tmp_path / "s.sqlite") as store:
        for job in runs:
            store.put(result(job, 100.0))
            store.put(result(job.reference(), 101.0))
        variants = store.variants()
        assert sorted(v.extra for v in variants) == ["n envs 2", "n envs 3"]
        assert len({v.slug() for v in variants}) == 2
        for variant in variants:
            keys = set(store.select(variant)["key"])
            job = runs[0] if variant.extra == "n envs 2" else runs[1]
            assert keys == {job.key, job.reference().key}
