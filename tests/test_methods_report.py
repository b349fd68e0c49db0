"""The methods report on hand-made statistics rows: which method a row measures, the minimum safe width per method
(``> W`` when even the widest misses), the paired gain over RTN, the W x A cells and the Pareto front."""

from __future__ import annotations

import pandas as pd
import pytest

from quarl_bench.report.methods import frontier_table, heatmap_table, method_of, paired_gain, safe_width_table


@pytest.mark.parametrize(
    ("spec", "precision", "method"),
    [
        ("default", "int4", "RTN"),
        ("per-channel", "int4", "RTN per-channel"),
        ("g32", "int4", "RTN group 32"),
        ("gptq cal1000", "int3", "GPTQ"),
        ("per-channel gptq cal500", "int3", "GPTQ per-channel"),
        ("learned-round cal1000", "int3", "learned rounding"),
        ("symmetric", "int8", "RTN symmetric"),
        ("default", "mxfp6", "MX (mxfp8/6/4)"),
        ("default", "nvfp4", "nvfp4"),
        ("default", "fp16", "fp16"),
        ("a8 cal-minmax1000", "int8", None),
        ("obs6 cal-mse1000", "fp32", None),
        ("afp8-e4m3 cal-minmax1000", "int8", None),
        ("prune0.5", "int8", None),
    ],
)
def test_each_row_belongs_to_one_method(spec: str, precision: str, method: str | None) -> None:
    assert method_of(spec, precision) == method


def stats_row(agent: str, spec: str, precision: str, low: float, mean_diff: float = 0.0, **extra) -> dict:
    bits = {"fp32": 32, "mxfp8": 8, "mxfp6": 6, "mxfp4": 4}.get(precision) or int(precision.removeprefix("int"))
    return {
        "algo": "dqn",
        "env": "CartPole-v1",
        "agent": agent,
        "spec": spec,
        "precision": precision,
        "bits": bits,
        "fp32 mean": 100.0,
        "reward CI low": low,
        "diff low": low - 100.0,  # the paired difference's lower bound: fp32 mean 100
        "delta": 5.0,  # 5% of |R_fp32| (no random baseline in these rows)
        "mean - fp32": mean_diff,
        "IQM": 100.0 + mean_diff,
        "IQM low": 90.0 + mean_diff,
        "IQM high": 110.0 + mean_diff,
        "rows": f"q{agent}{spec.replace(' ', '_')}{precision} ref{agent}",
        **extra,
    }


def test_safe_width_per_method_and_the_gain_over_rtn() -> None:
    rows = []
    for agent, rtn_low, gptq_low in (
        ("a", [99, 97, 60, 10], [99, 98, 97, 96]),
        ("b", [90, 90, 90, 90], [99, 99, 99, 50]),
    ):
        for bits, low in zip((8, 6, 4, 3), rtn_low, strict=True):
            rows.append(stats_row(agent, "default", f"int{bits}", low))
        for bits, low in zip((8, 6, 4, 3), gptq_low, strict=True):
            rows.append(stats_row(agent, "gptq cal1000", f"int{bits}", low))
    rows += [stats_row("a", "default", p, low) for p, low in (("mxfp8", 99), ("mxfp6", 96), ("mxfp4", 20))]
    table = safe_width_table(pd.DataFrame(rows), tolerance_pct=5).set_index("agent")
    # floor 95: a's RTN holds down to 6 bits, GPTQ to 3; b's RTN misses already at 8, GPTQ holds down to 4
    assert table.loc["a", "RTN"] == 6 and table.loc["a", "GPTQ"] == "≤ 3" and table.loc["a", "MX (mxfp8/6/4)"] == 6
    assert table.loc["b", "RTN"] == "> 8" and table.loc["b", "GPTQ"] == 4
    assert table.loc["a", "GPTQ rows"].split()[0] == "qagptq_cal1000int8"
    gain = paired_gain(table.reset_index(), "GPTQ")
    # '> 8' counts as 9: gains 3 (a) and 5 (b)
    assert gain["median gain (bits)"] == 4 and gain["agents gaining >= 2 bits"] == 2


def test_heatmap_cells_and_pareto_front() -> None:
    rows = [
        stats_row("a", "default", "int8", 99, -1.0),
        stats_row("a", "a4 cal-minmax1000", "int8", 50, -40.0),
        stats_row("a", "obs3 cal-minmax1000", "fp32", 90, -10.0),
        stats_row("a", "g32 a4 cal-minmax1000", "int8", 50, -40.0),  # two options at once: not a cell
    ]
    heat = heatmap_table(pd.DataFrame(rows)).set_index(["W", "input", "bits"])
    assert heat.loc[(8, "A", 32), "E%"] == pytest.approx(1.0) and heat.loc[(8, "A", 4), "E%"] == pytest.approx(40.0)
    assert heat.loc[(32, "obs", 3), "E%"] == pytest.approx(10.0) and len(heat) == 3
    frame = pd.DataFrame(
        [
            {"key": "qadefaultint8", "weights": {"acting_bytes": 1000}},
            {"key": "qadefaultint4", "weights": {"acting_bytes": 500}},
            {"key": "qaprune0.5int8", "weights": {"acting_bytes": 600, "nonzero_weights": 400}},
        ]
    )
    stats = pd.DataFrame(
        [
            stats_row("a", "default", "int8", 99, 0.0),
            stats_row("a", "default", "int4", 10, -90.0),
            stats_row("a", "prune0.5", "int8", 90, -5.0),
        ]
    )
    front = frontier_table(stats, frame).set_index("row")
    assert front["pareto"].to_dict() == {"qadefaultint4": True, "qaprune0.5int8": True, "qadefaultint8": True}
    assert front.loc["qaprune0.5int8", "nonzero weights"] == 400


def test_a_ladder_method_measured_at_one_width_stays_a_width() -> None:
    rows = [stats_row("a", "default", "mxfp4", 99), stats_row("a", "default", "int4", 99)]
    rows.append({**stats_row("a", "default", "int8", 99), "precision": "nvfp4", "bits": 4})
    table = safe_width_table(pd.DataFrame(rows), tolerance_pct=5).set_index("agent")
    # the narrowest width tried holds: narrower was not tried, so the answer is an upper bound
    assert (
        table.loc["a", "MX (mxfp8/6/4)"] == "≤ 4" and table.loc["a", "nvfp4"] == "ok" and table.loc["a", "RTN"] == "≤ 4"
    )
