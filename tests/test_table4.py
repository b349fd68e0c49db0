"""QuaRL Table 4 through the CLI: synthetic policies timed per backend, stored as timing rows, reused on a rerun,
and printed by the report next to the paper's RasPi figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from quarl_bench.deploy.machine import cpu_kind
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
    assert f"int8 {cpu_kind()} (" in row["machine"]  # the CPU's int8 kind and features, beside the figures
    assert row["speed-up"] > 0
    assert set(row["rows"].split(", ")) == set(timings["key"])  # each figure names the stored row it comes from
    assert "QuaRL Table 4" in out and "RasPi" in out


def test_table4_bad_calls(cli, tmp_path: Path) -> None:
    code, _, err = cli("table4", "--calls", "0", "--store", tmp_path / "quarl.sqlite")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "'0'" in err
    assert not (tmp_path / "quarl.sqlite").exists()


def test_table4_compares_the_fastest_int8_file_with_its_own_runtimes_fp32_file() -> None:
    """Hand-made timings: torch fp32 2.0 ms; ORT fp32 1.0 ms, 1000 bytes; two int8 backends, the faster one ORT's."""
    from quarl_bench.config import config_dir
    from quarl_bench.report.deployment import table4_comparison

    def timing(backend: str, p50: float, size: int) -> dict:
        return {
            "machine": "here",
            "calls": 100,
            "policy": "I",
            "backend": backend,
            "hidden": [64, 64, 64],
            "p50_ms": p50,
            "artifact_bytes": size,
            "peak_rss_mb": 50.0,
            "key": f"k-{backend}",
        }

    timings = pd.DataFrame(
        [
            timing("torch-fp32", 2.0, 9000),
            timing("ort-fp32", 1.0, 1000),
            timing("ort-int8-dynamic", 0.5, 400),
            timing("torchao-int8", 0.8, 3000),
        ]
    )
    paper = pd.read_csv(config_dir() / "paper" / "quarl_table4_deployment.csv")
    row = table4_comparison(timings, paper).iloc[0]
    assert row["int8 backend"] == "ort-int8-dynamic" and row["int8 ms"] == 0.5
    assert row["speed-up"] == 4.0 and row["vs ORT fp32"] == 2.0  # 2.0 / 0.5 and 1.0 / 0.5
    assert row["size base"] == "ort-fp32" and row["size ratio"] == 2.5  # 1000 / 400 bytes, ONNX against ONNX
    assert row["rows"] == "k-torch-fp32, k-ort-fp32, k-ort-int8-dynamic"


def test_timings_of_two_cpu_kinds_are_two_cells_never_one() -> None:
    """A VNNI machine's and an AVX2 machine's timings of the same policy: two rows, each its own speed-up."""
    from quarl_bench.config import config_dir
    from quarl_bench.report.console_deployment import cpu_kind_of
    from quarl_bench.report.deployment import table4_comparison

    def timing(machine: str, backend: str, p50: float) -> dict:
        found = {"machine": machine, "calls": 100, "policy": "III", "backend": backend, "hidden": [4096, 512, 1024]}
        return found | {"p50_ms": p50, "artifact_bytes": 1000, "peak_rss_mb": 50.0, "key": f"{machine}-{backend}"}

    vnni, avx2 = "EPYC, 2 cores, int8 x86-vnni (avx2 avx512_vnni)", "EPYC, 2 cores, int8 x86-avx2 (avx2)"
    timings = pd.DataFrame(
        [timing(vnni, "torch-fp32", 10.0), timing(vnni, "ort-int8-static", 2.0)]
        + [timing(avx2, "torch-fp32", 10.0), timing(avx2, "ort-int8-static", 4.0)]
    )
    paper = pd.read_csv(config_dir() / "paper" / "quarl_table4_deployment.csv")
    table = table4_comparison(timings, paper)
    assert sorted(table["speed-up"]) == [2.5, 5.0]
    assert sorted(cpu_kind_of(m) for m in table["machine"]) == ["x86-avx2", "x86-vnni"]


def test_a_deploy_speed_up_across_cpu_kinds_is_not_computed() -> None:
    from quarl_bench.report.deployment import int8_cpu

    vnni = {"machine": {"cpu_kind": "x86-vnni", "int8_features": ["avx2", "avx512_vnni"]}}
    avx2 = {"machine": {"cpu_kind": "x86-avx2", "int8_features": ["avx2"]}}
    assert int8_cpu(vnni) != int8_cpu(avx2) and int8_cpu({}) == "not recorded"


def test_a_timing_taken_under_load_is_flagged_in_the_table_and_on_the_console() -> None:
    """Table 4 once gave 6.39x where the docs said 3.06x: it was timed at load 6-9 on 2 cores and said nothing."""
    from quarl_bench.config import config_dir
    from quarl_bench.deploy.machine import load_record, load_text
    from quarl_bench.report.console_deployment import table4_table
    from quarl_bench.report.deployment import table4_comparison

    here = load_record()
    assert here["cores"] >= 1 and here["busy"] == (here["load_1m"] is not None and here["load_1m"] > here["cores"])
    busy = {"load_1m": 6.39, "cores": 2, "busy": True}
    assert load_text(busy) == "load 6.39 on 2 cores (busy)" and load_text(None) == ""

    def timing(backend: str, p50: float, load: dict) -> dict:
        found = {"machine": "EPYC", "calls": 100, "policy": "I", "backend": backend, "hidden": [64, 64]}
        found |= {"p50_ms": p50, "artifact_bytes": 1000, "peak_rss_mb": 50.0, "key": backend}
        return found | {"provenance": {"load": load}}

    quiet = {"load_1m": 0.8, "cores": 2, "busy": False}
    paper = pd.read_csv(config_dir() / "paper" / "quarl_table4_deployment.csv")
    table = table4_comparison(
        pd.DataFrame([timing("torch-fp32", 1.0, busy), timing("ort-int8-static", 0.3, quiet)]), paper
    )
    assert table["busy"].tolist() == [True]
    assert table["load"].tolist() == ["load 0.80 on 2 cores; load 6.39 on 2 cores (busy)"]
    assert "busy" in str(table4_table(table).caption)
