"""A store written by an older release (tests/data/store_schema8.sqlite, see tests/data/README.md) opens, reports
and keeps every row; a new run on it adds rows and deletes none."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from quarl_bench.action_modes import ActionMode
from quarl_bench.store import ResultStore
from quarl_bench.store.schema import SCHEMA_VERSION
from quarl_bench.store.spec_kinds import method_of, spec_of, target_of
from quarl_bench.types import Job

OLD_STORE = Path(__file__).parent / "data" / "store_schema8.sqlite"


def rebuilt_job(row: pd.Series) -> Job:
    """A stored row's job rebuilt from its columns and its ``spec_json`` alone (method and target included)."""
    fields = row["spec_json"]
    return Job(
        row["algo"],
        row["env_id"],
        spec_of(fields),
        row["agent_hash"],
        row["episodes"],
        row["seed"],
        row["n_envs"],
        ActionMode(row["action_mode"], row["epsilon"]),
        row["setting"],
        row["obs_noise"],
        method_of(fields),
        target_of(fields),
    )


@pytest.fixture()
def old_store(tmp_path: Path) -> Path:
    path = tmp_path / "old.sqlite"
    shutil.copy(OLD_STORE, path)
    return path


def test_the_fixture_is_a_schema_8_store() -> None:
    with sqlite3.connect(f"file:{OLD_STORE}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 8
        columns = {row[1] for row in db.execute("PRAGMA table_info(results)")}
        assert "spec_json" not in columns and "recipe" in columns
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 20


def test_every_old_row_gets_the_spec_that_made_its_key(old_store: Path) -> None:
    """The migrated spec rebuilds each row's job key exactly: the legacy recipe labels were read without loss."""
    with ResultStore(old_store) as store:
        frame = store.to_dataframe()
        assert len(frame) == 20 and len(store.verdicts()) == 2 and len(store.fidelity()) == 2
    for _, row in frame.iterrows():
        job = rebuilt_job(row)
        assert job.method == row["method"]
        assert job.key == row["key"], (row["precision"], row["recipe"], row["layer_bits"])
    recipes = {spec_of(f).recipe_label() for f in frame["spec_json"]}
    assert {"a8 g32 cal-minmax50", "gptq cal50", "prune0.5"} <= recipes
    with sqlite3.connect(old_store) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT COUNT(*) FROM hardened").fetchone()[0] == 0  # schema 10's table, empty


def test_an_old_store_reports_and_a_new_run_adds_rows(cli, old_store: Path, tmp_path: Path) -> None:
    code, _, err = cli("report", "--store", old_store, "--out", tmp_path / "report", "--html", "--formats", "svg")
    assert code == 0, err
    statistics = pd.read_csv(tmp_path / "report" / "reward_statistics.csv")
    assert set(statistics["spec"]) == {"default", "a8 g32 cal-minmax50", "gptq cal50", "prune0.5"}
    assert "gptq cal50" in (tmp_path / "report" / "report.html").read_text()
    module = tmp_path / "tiny_policy.py"
    module.write_text(
        "import torch\n\ndef make():\n    torch.manual_seed(0)\n    return torch.nn.Sequential(torch.nn.Linear(4, 2))\n"
    )
    before = set(ResultStore(old_store).to_dataframe()["key"])
    code, _, err = cli(
        "run",
        "--policy-module",
        f"{module}:make",
        "--env",
        "CartPole-v1",
        "--bits",
        "32",
        "8",
        "-n",
        "2",
        "--store",
        old_store,
    )
    assert code == 0, err
    after = ResultStore(old_store).to_dataframe()
    assert before < set(after["key"]) and len(after) == 22


SCHEMA_11_STORE = Path(__file__).parent / "data" / "store_schema11.sqlite"
POLICY = Path(__file__).parent / "data" / "tiny_policy.py"


def test_a_store_from_when_method_and_backend_were_spec_fields_keeps_its_keys(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/data/store_schema11.sqlite (release 9a4c612, see tests/data/README.md): PTQ, random-policy, per-layer
    and deploy rows (ort-int8-static calibrated) and certify/export verdicts. Each row's key is rebuilt from what
    is stored, and running the same commands again plays nothing it need not; except what changed on purpose: the
    ort-int8-static row (its artifact now calibrates once on its claim's states, where that row's calibrated per
    batch seed on others) is played again under a new key, δ's random policy now plays 300 episodes (was 100,
    issue 53), so its scale row is new and the verdicts are decided anew from the stored batches, and export's
    closed loop plays the artifact it names by its sha256 (issue 74: its certificate is measured on its bytes)."""
    store = tmp_path / "old.sqlite"
    shutil.copy(SCHEMA_11_STORE, store)
    shutil.copy(POLICY, tmp_path / "tiny_policy.py")
    with ResultStore(store) as opened:
        frame, verdicts = opened.to_dataframe(), opened.verdicts()
    assert {(m, b) for m, b in zip(frame["method"], frame["backend"], strict=True)} == {
        ("ptq", ""),
        ("random", ""),
        ("deploy", "torch-fp32"),
        ("deploy", "ort-fp32"),
        ("deploy", "ort-int8-static"),
    }
    static = frame["backend"] == "ort-int8-static"
    assert [rebuilt_job(row).key for _, row in frame[~static].iterrows()] == list(frame.loc[~static, "key"])
    assert [rebuilt_job(row).key for _, row in frame[static].iterrows()] != list(frame.loc[static, "key"])
    monkeypatch.chdir(tmp_path)  # the module's hash covers the target as typed: tiny_policy.py:make
    agent = ("--policy-module", "tiny_policy.py:make", "--env", "CartPole-v1", "--store", store)
    for command in (
        ("run", *agent, "--bits", "32", "8", "--random-baseline", "-n", "4"),
        ("deploy", *agent, "--backend", "ort-int8-static", "ort-fp32", "-n", "4"),
        ("certify", *agent, "--bits", "8", "4", "--max-episodes", "40"),
        ("export", *agent, "--backend", "ort-fp32", "--out", tmp_path / "artifact", "--max-episodes", "40"),
    ):
        code, out, err = cli(*command)
        assert code == 0, (command, err)
    with ResultStore(store) as opened:
        after = opened.to_dataframe()
        added = after[~after["key"].isin(frame["key"])]
        # export's closed loop now plays the artifact it names by its bytes (a row of its own per batch): not
        # answered from the old rows, which named no artifact
        named = [fields.get("artifact", "") for fields in added["spec_json"]]
        exported = added[[bool(sha) for sha in named]]
        assert len(exported) >= 1 and set(exported["backend"]) == {"ort-fp32"}
        rest = added[[not sha for sha in named]]
        assert set(after["key"]) > set(frame["key"]) and len(rest) == static.sum() + 1
        pairs = sorted(zip(rest["method"], rest["backend"], strict=True))
        assert pairs == [("deploy", "ort-int8-static"), ("random", "")]
        assert (added.loc[added["method"] == "random", "episodes"] == 300).all()
        now = opened.verdicts()
        assert set(now["key"]) > set(verdicts["key"]) and len(now) == 2 * len(verdicts)  # the old ones kept
    assert "closed loop against fp32 torch" in out or "closed loop against" in out
