"""Fidelity on one fixed set of fp32-visited states: every width is asked about the same states."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quarl_bench.store.results import load_results


def test_flip_rates_are_measured_on_the_same_fp32_states_for_every_width(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = ("run", "--algo", "dqn", "--env", "CartPole-v1", "--bits", "fp16", "8", "2", "-n", "10", "--no-hub")
    code, out, err = cli(*args, "--folder", zoo, "--store", store)
    assert code == 0, err
    assert "flips, fp32 states" in out and "same, own states" in out
    rows = load_results(store).set_index("precision")
    fp16, int8, int2 = (rows.loc[p] for p in ("fp16", "int8", "int2"))
    assert fp16["fixed_states"] == int8["fixed_states"] == int2["fixed_states"] == 1000
    assert fp16["fixed_flip_rate"] <= int8["fixed_flip_rate"] < int2["fixed_flip_rate"]
    # near-ties flip more easily than clear decisions; the split covers the whole set
    for found in (int8, int2):
        assert found["fixed_flip_near_tie"] >= found["fixed_flip_clear"]
        whole = 0.25 * found["fixed_flip_near_tie"] + 0.75 * found["fixed_flip_clear"]
        assert np.isclose(whole, found["fixed_flip_rate"], atol=1e-3)
    assert np.isnan(rows.loc["fp32", "fixed_flip_rate"])  # fp32 is the reference itself
