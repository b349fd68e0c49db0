"""The methods report on hand-made statistics rows: which method a spec measures (by its fields), the minimum safe width per method
(``> W`` when even the widest misses), the paired gain over RTN, the W x A cells and the Pareto front."""

from __future__ import annotations

import pandas as pd
import pytest

from quarl_bench.precision import precision_bits
from quarl_bench.report.methods import frontier_table, heatmap_table, paired_gain, safe_width_table
from quarl_bench.report.statistics import spec_kind_columns
from quarl_bench.store.spec_kinds import variant_label, weight_method
from quarl_bench.types import QuantSpec


@pytest.mark.parametrize(
    ("precision", "options", "method"),
    [
        ("int4", {}, "RTN"),
        ("int4", {"granularity": "per-channel"}, "RTN per-channel"),
        ("int4", {"group_size": 32}, "RTN group 32"),
        ("int3", {"ptq": "gptq"}, "GPTQ"),
        ("int3", {"ptq": "gptq", "granularity": "per-channel", "calibration_states": 500}, "GPTQ per-channel"),
        ("int3", {"ptq": "learned-round"}, "learned rounding"),
        ("int8", {"symmetric": True}, "RTN symmetric"),
        ("mxfp6", {}, "MX (mxfp8/6/4)"),
        ("nvfp4", {}, "nvfp4"),
        ("fp16", {}, "fp16"),
        ("int8", {"act_bits": "8"}, None),
        ("fp32", {"obs_bits": "6", "calibration_method": "mse"}, None),
        ("int8", {"act_bits": "fp8-e4m3"}, None),
        ("int8", {"prune": 0.5}, None),
    ],
)
def test_each_spec_belongs_to_one_method_by_its_fields(precision: str, options: dict, method: str | None) -> None:
    assert weight_method(QuantSpec(precision, **options)) == method


def stats_row(agent: str, options: dict, precision: str, low: float, mean_diff: float = 0.0) -> dict:
    """A statistics row of ``QuantSpec(precision, **options)`` whose paired difference's lower bound is ``low - 100``."""
    spec = QuantSpec(precision, **options)
    label = variant_label(spec)
    return {
        "algo": "dqn",
        "env": "CartPole-v1",
        "agent": agent,
        "question across specs": f"question of {agent}",  # one agent's nominal question, the spec summed over
        "question across specs label": "nominal",
        "seed list": "0",
        "spec": label,
        "precision": precision,
        "bits": precision_bits(precision),
        "fp32 mean": 100.0,
        "reward CI low": low,
        "diff low": low - 100.0,  # the paired difference's lower bound: fp32 mean 100
        "sequence low": low - 100.0,  # certify's sequence read once: the bound the report's one rule reads
        "delta": 5.0,  # 5% of |R_fp32| (no random baseline in these rows)
        "mean - fp32": mean_diff,
        "IQM": 100.0 + mean_diff,
        "IQM low": 90.0 + mean_diff,
        "IQM high": 110.0 + mean_diff,
        "rows": f"q{agent}{label.replace(' ', '_')}{precision} ref{agent}",
        **spec_kind_columns(spec),
    }


def test_safe_width_per_method_and_the_gain_over_rtn() -> None:
    rows = []
    for agent, rtn_low, gptq_low in (
        ("a", [99, 97, 60, 10], [99, 98, 97, 96]),
        ("b", [90, 90, 90, 90], [99, 99, 99, 50]),
    ):
        for bits, low in zip((8, 6, 4, 3), rtn_low, strict=True):
            rows.append(stats_row(agent, {}, f"int{bits}", low))
        for bits, low in zip((8, 6, 4, 3), gptq_low, strict=True):
            rows.append(stats_row(agent, {"ptq": "gptq"}, f"int{bits}", low))
    rows += [stats_row("a", {}, p, low) for p, low in (("mxfp8", 99), ("mxfp6", 96), ("mxfp4", 20))]
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
        stats_row("a", {}, "int8", 99, -1.0),
        stats_row("a", {"act_bits": "4"}, "int8", 50, -40.0),
        stats_row("a", {"obs_bits": "3"}, "fp32", 90, -10.0),
        stats_row("a", {"group_size": 32, "act_bits": "4"}, "int8", 50, -40.0),  # two options at once: not a cell
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
            stats_row("a", {}, "int8", 99, 0.0),
            stats_row("a", {}, "int4", 10, -90.0),
            stats_row("a", {"prune": 0.5}, "int8", 90, -5.0),
        ]
    )
    front = frontier_table(stats, frame).set_index("row")
    assert front["pareto"].to_dict() == {"qadefaultint4": True, "qaprune0.5int8": True, "qadefaultint8": True}
    assert front.loc["qaprune0.5int8", "nonzero weights"] == 400


def test_a_ladder_method_measured_at_one_width_stays_a_width() -> None:
    rows = [stats_row("a", {}, "mxfp4", 99), stats_row("a", {}, "int4", 99), stats_row("a", {}, "nvfp4", 99)]
    table = safe_width_table(pd.DataFrame(rows), tolerance_pct=5).set_index("agent")
    # the narrowest width tried holds: narrower was not tried, so the answer is an upper bound
    assert (
        table.loc["a", "MX (mxfp8/6/4)"] == "≤ 4" and table.loc["a", "nvfp4"] == "ok" and table.loc["a", "RTN"] == "≤ 4"
    )
