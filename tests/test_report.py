"""Reports: table numbers equal the store, figures are written; the statistics on hand-made inputs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from quarl_bench.config import config_dir
from quarl_bench.report.estimators import bootstrap_ci
from quarl_bench.report.plots import Curve, sweet_spot
from quarl_bench.report.safe_bits import safe_bits_table, safe_rule
from quarl_bench.store.results import load_results


def test_bootstrap_ci() -> None:
    assert bootstrap_ci([500.0] * 10) == (500.0, 500.0)
    low, high = bootstrap_ci([0.0, 10.0] * 50)
    assert 3.5 < low < 5.0 < high < 6.5


def test_the_sweet_spot_marks_the_width_the_safe_bits_table_calls_safe_at_the_tolerance_asked() -> None:
    points = pd.DataFrame({"bits": [2, 4, 6, 8], "mean_reward": [10.0, 96.0, 101.0, 99.0], "std_reward": [0.0] * 4})
    lower = {8: -1.0, 6: -3.0, 4: -6.0, 2: -50.0}  # certify's sequence read once, per width
    at = {pct: Curve(points, 100.0, lower, pct, safe_rule(pct)) for pct in (5.0, 10.0)}  # δ = pct% of |R_fp32| 100
    assert sweet_spot(at[5.0]) == (6, 6) and sweet_spot(at[10.0]) == (6, 4)  # best reward 6 bits; safe by the rule
    assert "5% of (R_fp32 - R_random)" in at[5.0].rule and "10% of" in at[10.0].rule
    assert Curve(points, 100.0, {}, float("nan"), "").lowest_safe() is None  # no paired evidence: nothing marked
    statistics = pd.DataFrame(
        {
            "algo": "dqn",
            "env": "CartPole-v1",
            "agent": "a",
            "episodes": 20,
            "question": "q",
            "condition": "nominal",
            "spec": "default",
            "seed list": "0",
            "precision": [f"int{b}" for b in lower],
            "bits": list(lower),
            "fp32 mean": 100.0,
            "random mean": None,
            "delta": 5.0,
            "sequence low": list(lower.values()),
            "guarantee": "finite-sample",
            "rows": [f"q{b} ref" for b in lower],
        }
    )
    assert safe_bits_table(statistics, 5.0)["minimum safe bits"].iloc[0] == 6  # the table agrees with the figure
    assert safe_bits_table(statistics, 5.0)["why"].iloc[0] == ""


def test_a_width_none_can_pass_on_too_few_episodes_says_so() -> None:
    """5 CartPole episodes: the finite-sample bound is -238.5 even for identical returns, so "> 8" means too few
    pairs, not unsafe widths; the table says how many pairs would do."""
    statistics = pd.DataFrame(
        {
            "algo": "ppo",
            "env": "CartPole-v1",
            "agent": "a",
            "episodes": 5,
            "question": "q",
            "condition": "nominal",
            "spec": "default",
            "seed list": "0",
            "precision": ["int8", "int4"],
            "bits": [8, 4],
            "fp32 mean": 500.0,
            "random mean": None,
            "delta": 25.0,
            "sequence low": [-238.5, -238.5],
            "guarantee": "finite-sample",
            "rows": ["q8 ref", "q4 ref"],
        }
    )
    row = safe_bits_table(statistics, 5.0).iloc[0]
    assert row["minimum safe bits"] == "> 8"
    assert row["why"] == "5 pairs cannot show any width safe (identical returns would give -238.5, δ 25); 65 would"


@pytest.mark.slow
def test_report_from_a_swept_store(cli, zoo: Path, tmp_path: Path) -> None:
    store, out = tmp_path / "quarl.sqlite", tmp_path / "report"
    sweep = ("sweep", config_dir() / "smoke.yaml", "--algo", "ppo", "dqn", "-n", "5", "--workers", "1")
    code, _, err = cli(*sweep, "--folder", zoo, "--cache", tmp_path / "cache", "--store", store)
    assert code == 0, err
    code, out_text, err = cli("report", "--all-files", "--store", store, "--out", out)
    assert code == 0, err
    assert "variant: episodes 5" in out_text  # 5-episode rows are not the default (100) variant: labelled as such
    rows = load_results(store).set_index(["algo", "precision"])
    side_by_side = pd.read_csv(out / "paper_vs_measured.csv")  # against zoo_configs/paper/quarl_table2.csv
    assert sorted(zip(side_by_side["algo"], side_by_side["precision"], strict=True)) == [
        (algo, precision) for algo in ("dqn", "ppo") for precision in ("fp16", "fp32", "int8")
    ]
    ppo_fp32 = side_by_side.query("algo == 'ppo' and precision == 'fp32'").iloc[0]
    assert ppo_fp32["paper reward"] == 500 and ppo_fp32["env"] == "CartPole-v1" and ppo_fp32["layers"] == "paper"
    assert ppo_fp32["measured reward"] == rows.loc[("ppo", "fp32"), "mean_reward"] == 500.0
    assert ppo_fp32["paper inside CI"] and ppo_fp32["row key"] == rows.loc[("ppo", "fp32"), "key"]
    for name in ("reward_error_table__episodes-5.md", "reward_error_table__episodes-5.csv", "sweetspot_grid.png"):
        assert (out / name).stat().st_size > 0
    table = pd.read_csv(out / "reward_error_table__episodes-5.csv", header=[0, 1], index_col=0)
    for algo in ("ppo", "dqn"):
        assert table.loc["CartPole-v1", (algo, "fp32 Rwd")] == pytest.approx(rows.loc[(algo, "fp32"), "mean_reward"])
        assert table.loc["CartPole-v1", (algo, "int8 Rwd")] == pytest.approx(rows.loc[(algo, "int8"), "mean_reward"])
        assert table.loc["CartPole-v1", (algo, "E_int8 %")] == pytest.approx(rows.loc[(algo, "int8"), "E %"])
        assert table.loc["Mean", (algo, "E_int8 %")] == pytest.approx(rows.loc[(algo, "int8"), "E %"])
    assert {p.suffix for p in out.glob("sweetspot_*")} == {".svg", ".png"}  # the default formats: no pdf
    code, _, err = cli("report", "--all-files", "--store", store, "--out", tmp_path / "pdf", "--formats", "pdf")
    assert code == 0, err
    assert {p.suffix for p in (tmp_path / "pdf").glob("sweetspot_*")} == {".pdf"}


@pytest.mark.slow
def test_notebook_runs_on_a_small_store(cli, zoo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    store = tmp_path / "quarl.sqlite"
    sweep = ("sweep", config_dir() / "smoke.yaml", "-n", "3", "--workers", "1")
    assert cli(*sweep, "--folder", zoo, "--cache", tmp_path / "cache", "--store", store)[0] == 0
    monkeypatch.setenv("QUARL_STORE", str(store))
    notebook = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / "analysis.ipynb", as_version=4)
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    texts = " ".join(o.get("text", "") for o in outputs)
    assert "12 jobs, 3 agents" in texts and "showing: episodes 3" in texts  # 3 agents x 4 precisions, one variant
    # the figure cells draw (the report once switched the kernel off its inline backend at import: no images)
    figure_cells = [cell for cell in notebook.cells if cell.cell_type == "code" and "plt.subplots" in cell.source]
    assert len(figure_cells) == 3
    for cell in figure_cells:  # an image, or (no data for it in this variant) a line saying so: never empty axes
        images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        said = " ".join(o.get("text", "") for o in cell.outputs)
        assert images or said.startswith("no "), cell.source[:80]
    assert any("image/png" in o.get("data", {}) for o in figure_cells[0].outputs)  # the sweet spot: 2+ widths here
    tables = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "E % CI low" in tables  # the paper comparison carries the paired E % CI (the paper page's cells)


def test_qat_vs_ptq_matches_on_precision_not_bits() -> None:
    from quarl_bench.report.tables import qat_vs_ptq_table

    def rows(agent: str, precisions: list[str], rewards: list[float]) -> pd.DataFrame:
        bits = {"fp32": 32, "fp16": 16, "bf16": 16, "int16": 16, "int4": 4}
        return pd.DataFrame(
            {
                "algo": "ppo",
                "env_id": "CartPole-v1",
                "precision": precisions,
                "bits": [bits[p] for p in precisions],
                "mean_reward": rewards,
                "agent_hash": agent,
                "reference_key": f"ref-{agent}",
            }
        )

    qat = pd.concat(
        [rows("seed0", ["fp32", "int4", "int16"], [500, 480, 499]), rows("seed1", ["fp32", "int4"], [500, 490])]
    )
    ptq = rows("zoo", ["fp32", "int4", "fp16", "bf16"], [500, 100, 498, 497])
    table = qat_vs_ptq_table(qat, ptq).set_index("precision")
    assert (
        table.loc["int4", "PTQ Rwd"] == 100
        and table.loc["int4", "QAT Rwd"] == 485
        and table.loc["int4", "QAT seeds"] == 2
    )
    assert pd.isna(table.loc["int16", "PTQ Rwd"])  # no int16 PTQ row: fp16/bf16 (also 16 bits) are not it
    assert table.loc["int4", "QAT std over seeds"] == 5.0 and table.loc["int4", "ptq agent"] == "zoo"


def test_a_small_store_gets_the_files_a_reader_opens(cli, tmp_path: Path) -> None:
    """One agent's store (tests/data/store_schema11.sqlite: PTQ, deploy, sensitivity, certify and export rows):
    by default the page, a CSV per table with rows and the page's figures as SVG, at most 26 files, and no reward
    table per certification batch; ``--all-files`` keeps every format and table."""
    import shutil

    store = tmp_path / "one.sqlite"
    shutil.copy(Path(__file__).parent / "data" / "store_schema11.sqlite", store)
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "lean", "--html")
    assert code == 0, err
    lean = sorted(p.name for p in (tmp_path / "lean").iterdir())
    # 20 before the paper page (summary, cells, the two paper-shaped tables) and the tidy and compact reward tables
    assert len(lean) <= 26 and {Path(name).suffix for name in lean} == {".csv", ".svg", ".html"}
    assert not any(name.startswith("reward_error_table__seed-") for name in lean)  # certify's batch seeds
    code, _, err = cli("report", "--all-files", "--store", store, "--out", tmp_path / "all", "--html")
    assert code == 0, err
    every = {p.name for p in (tmp_path / "all").iterdir()}
    assert set(lean) < every and any(name.startswith("reward_error_table__seed-") for name in every)


@pytest.fixture(scope="module")
def one_verdict(zoo: Path, tmp_path_factory: pytest.TempPathFactory) -> pd.Series:
    """One stored verdict (dqn CartPole int8, safe), as the report reads it from the store."""
    from quarl_bench.cli import main
    from quarl_bench.store import ResultStore

    store = tmp_path_factory.mktemp("verdict") / "quarl.sqlite"
    args = ["certify", "--algo", "dqn", "--env", "CartPole-v1", "--folder", str(zoo), "--no-hub", "--bits", "int8"]
    args += ["--tolerance-abs", "1000", "--max-episodes", "20", "--batch", "10", "--store", str(store)]
    assert main(args) == 0
    with ResultStore(store) as opened:
        return opened.verdicts().iloc[0]


def _other(row: pd.Series, field: str) -> pd.Series:
    """``row`` answering another question: the same verdict but for one field, and decided unsafe."""
    other = row.copy()
    if field == "method":
        other["spec_json"] = row["spec_json"] | {"method": "replayed"}
    elif field == "seed":
        other["settings"] = row["settings"] | {"seed": row["settings"]["seed"] + 1}
    elif field == "outcome":
        other["settings"] = row["settings"] | {"outcome": "success", "success": "truncated"}
    elif field == "condition":
        other["settings"] = row["settings"] | {"perturb": "action-noise=0.1"}
    else:  # tolerance, alpha: columns of their own
        other[field] = f"{row[field]} (other)" if field == "tolerance" else float(row[field]) / 2
    other["verdict"], other["key"], other["rows"] = "unsafe", "other", ["other-rows"]
    return other


@pytest.mark.parametrize("field", ["method", "tolerance", "alpha", "seed", "outcome", "condition"])
def test_two_verdicts_differing_in_one_setting_are_never_one_answer(one_verdict: pd.Series, field: str) -> None:
    from quarl_bench.report.methods import certified_width_table
    from quarl_bench.report.verdicts import verdict_grid

    verdicts = pd.DataFrame([one_verdict, _other(one_verdict, field)]).reset_index(drop=True)
    grid = verdict_grid(verdicts)
    assert len(grid) == 2 and sorted(grid["int8"].str.split(" ").str[0]) == ["safe", "unsafe"]
    widths = certified_width_table(verdicts)
    method_columns = [column for column in widths.columns if column.startswith("RTN") and not column.endswith("rows")]
    cells = [value for column in method_columns for value in widths[column].dropna()]
    assert sorted(cells) == ["> 8", "≤ 8"]  # two answers, never one merged minimum
