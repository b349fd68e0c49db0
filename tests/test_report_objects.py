"""The report as one list of Table and Figure objects: each names its page section and the stored rows behind it;
the files and report.html render that list."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from quarl_bench.config import config_dir
from quarl_bench.report.objects import SECTIONS, Figure, Table, latex_tabular
from quarl_bench.report.writer import write_report
from quarl_bench.store import ResultStore

OLD_STORE = Path(__file__).parent / "data" / "store_schema8.sqlite"


def test_latex_tabular_of_a_two_level_table() -> None:
    frame = pd.DataFrame(
        [[1.234, np.nan, "a_b"], [2.0, 3.5, "x%"]],
        index=["CartPole-v1", "Mean"],
        columns=pd.MultiIndex.from_tuples([("dqn", "fp32 Rwd"), ("dqn", "E_int8 %"), ("ppo", "fp32 CI")]),
    )
    assert latex_tabular(frame) == (
        "\\begin{tabular}{lrrr}\n\\toprule\n"
        " & \\multicolumn{2}{c}{dqn} & \\multicolumn{1}{c}{ppo} \\\\\n"
        " & fp32 Rwd & E\\_int8 \\% & fp32 CI \\\\\n\\midrule\n"
        "CartPole-v1 & 1.23 &  & a\\_b \\\\\nMean & 2.00 & 3.50 & x\\% \\\\\n\\bottomrule\n\\end{tabular}\n"
    )


def test_every_object_names_its_section_and_stored_rows_and_the_page_shows_every_figure(tmp_path: Path) -> None:
    store_path = tmp_path / "store.sqlite"
    shutil.copy(OLD_STORE, store_path)
    out = tmp_path / "report"
    with ResultStore(store_path) as store:
        keys = set(store.to_dataframe()["key"])
        report = write_report(store, out, config_dir() / "paper", formats=("svg",), html=True, figure_workers=0)
    figures = [item for item in report.items if isinstance(item, Figure)]
    tables = [item for item in report.items if isinstance(item, Table)]
    names = {f.name for f in figures}
    assert {"sensitivity_ppo_CartPole-v1", "fidelity_ppo_CartPole-v1", "performance_profile"} <= names
    assert all(item.section in SECTIONS for item in report.items)
    for figure in figures:  # drawn from stored rows, named by their keys (fidelity rows name their job's key)
        assert figure.row_keys and set(figure.row_keys) <= keys, figure.name
        assert (out / f"{figure.name}.svg").is_file()
    by_name = {t.name: t for t in tables}
    assert set(by_name["certified_verdicts"].row_keys) <= keys and by_name["certified_verdicts"].row_keys
    page = report.page.read_text()
    shown = [f for f in figures if f.on_page]
    assert page.count("<img") == len(shown) and all(f'alt="{f.name}"' in page for f in shown)
    assert page.index("<h2>Certified verdicts</h2>") < page.index("<h2>Per-layer sensitivity</h2>")
