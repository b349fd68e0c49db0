"""QuaRL Table 4 through the CLI: synthetic policies timed per backend, stored as timing rows, reused on a rerun,
and printed by the report next to the paper's RasPi figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from quarl_bench.store import ResultStore


def test_table4_times_stores_and_reports_next_to_the_paper(cli, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = ("table4", "--policy", "I", "--backend", "ort-int8-dynamic", "--calls", "50", "--store", store)
    code, out, err = cli(*args)
    assert code == 0, err
    with ResultStore(store) as opened:
        timings = opened.timings()
    assert sorted(timings["backend"]) == ["ort-int8-dynamic", "torch-fp32"]  # fp32, the reference, always runs
    assert timings["hidden"].map(tuple).tolist() == [(64, 64, 64)] * 2 and (timings["calls"] == 50).all()
    by_backend = timings.set_index("backend")
    assert by_backend.loc["ort-int8-dynamic", "artifact_bytes"] < by_backend.loc["torch-fp32", "artifact_bytes"] / 2
    assert (timings["p50_ms"] > 0).all() and (timings["p99_ms"] >= timings["p50_ms"]).all()

    code, _, err = cli(*args)  # a rerun reuses the stored rows
    assert code == 0, err
    with ResultStore(store) as opened:
        assert opened.timings()["created_at"].tolist() == timings["created_at"].tolist()

    code, out, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    table = pd.read_csv(tmp_path / "report" / "table4.csv")
    assert table["policy"].tolist() == ["Policy I"]  # only what was timed
    row = table.iloc[0]
    assert row["paper fp32 ms"] == 0.147 and row["paper int8 ms"] == 0.124 and "RasPi-3b+" in row["paper machine"]
    assert row["int8 backend"] == "ort-int8-dynamic" and "cores" in row["machine"]
    assert row["speed-up"] == by_backend.loc["torch-fp32", "p50_ms"] / by_backend.loc["ort-int8-dynamic", "p50_ms"]
    assert set(row["rows"].split(", ")) == set(timings["key"])  # each figure names the stored row it comes from
    assert "QuaRL Table 4" in out and "RasPi" in out


def test_table4_bad_calls(cli, tmp_path: Path) -> None:
    code, _, err = cli("table4", "--calls", "0", "--store", tmp_path / "quarl.sqlite")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "'0'" in err
    assert not (tmp_path / "quarl.sqlite").exists()
