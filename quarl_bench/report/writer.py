"""``quarl-bench report``: every table and figure, each from rows the store selects for one explicit variant."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from quarl_bench.store import ResultStore, Variant


def write_report(
    store: ResultStore,
    out_dir: Path,
    paper_dir: Path,
    tolerance_pct: float = 5.0,
    formats: tuple[str, ...] = ("svg", "png"),
) -> list:
    """:func:`_write_report` with figures in ``formats`` (svg: what report.html embeds; png; pdf on request)."""
    from quarl_bench.report.plots import figure_formats

    with figure_formats(formats, background=True):
        return _write_report(store, out_dir, paper_dir, tolerance_pct)


def _write_report(store: ResultStore, out_dir: Path, paper_dir: Path, tolerance_pct: float = 5.0) -> list:
    """Write the report files into ``out_dir``; returns the lines to print (tables, variants, files written).

    The reward-error table is written once per PTQ variant in the store (seed, episodes, grid options, layer mode),
    each file named after its variant (no suffix for the default: seed 0, 100 episodes, default spec). Figures and
    the other tables use the primary variant: the default if the store has it, else the first one found.
    """
    from quarl_bench.report.actorq import write_actorq_report
    from quarl_bench.report.divergence import write_fidelity_report
    from quarl_bench.report.layers import write_layer_report
    from quarl_bench.report.methods import write_methods_report
    from quarl_bench.report.plots import write_qat_figures, write_sweet_spot_figures, write_weight_figures
    from quarl_bench.report.rollout import write_rollout_report
    from quarl_bench.report.statistics import seeded_statistics, write_statistics_report
    from quarl_bench.report.tables import (
        paper_reference,
        paper_vs_measured,
        qat_vs_ptq_table,
        reward_error_table,
        write_amp_table,
        write_reward_error_table,
        write_table,
        write_weight_spread,
    )
    from quarl_bench.report.verdicts import verdict_grid, write_verdict_report

    lines: list = []  # strings and rich tables
    written: list[Path] = []
    verdicts = store.verdicts()
    if len(verdicts):  # the answer first: certified verdicts, agents x precisions
        grid = verdict_grid(verdicts)
        lines += [
            "Certified verdicts (paired episodes per decision in brackets)",
            grid.drop(columns="rows").to_string(na_rep="-"),
        ]
        written += write_verdict_report(verdicts, out_dir)
    variants = store.variants("ptq") or [Variant()]
    for variant in variants:
        table = reward_error_table(store.select(variant))
        if table.empty:
            continue
        written += write_reward_error_table(table, out_dir, variant.slug(), variant.label())
        lines += [f"Reward-error table, variant: {variant.label()}", table.round(2).to_string(na_rep="-")]
    primary = variants[0]
    lines.append(f"Figures and comparisons use the variant: {primary.label()}")
    default = store.select(primary)
    written += write_sweet_spot_figures(default, out_dir)
    written += write_weight_figures(default, out_dir)
    written += write_weight_spread(default, out_dir)
    qat_variants = store.variants("qat")
    qat_vs_ptq = qat_vs_ptq_table(store.select(qat_variants[0]), default) if qat_variants else pd.DataFrame()
    written += write_table(qat_vs_ptq, out_dir, "qat_vs_ptq")
    written += write_qat_figures(qat_vs_ptq, out_dir)
    paper = paper_reference(paper_dir)
    comparisons = [
        paper_vs_measured(store.select(replace(primary, layers=mode)), paper, mode) for mode in ("paper", "quarl-code")
    ]
    comparisons = [c for c in comparisons if not c.empty]
    comparison = pd.concat(comparisons, ignore_index=True) if comparisons else pd.DataFrame()
    written += write_table(comparison, out_dir, "paper_vs_measured")
    if not comparison.empty:
        inside = comparison["paper inside CI"]
        lines.append(
            f"Paper vs measured: {int(inside.sum())} of {len(inside)} published rewards lie inside the "
            "measured 95% CI (paper_vs_measured.md)"
        )
    from quarl_bench.report.deployment import (
        deployment_table,
        table4_comparison,
        write_deployment_report,
        write_table4,
    )

    tables = [
        deployment_table(store.select(v), store.select(Variant("ptq", v.seed, v.episodes)))
        for v in store.variants("deploy")
    ]
    written += write_deployment_report(pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(), out_dir)
    timings = store.timings()
    if len(timings):
        from quarl_bench.report.console_deployment import table4_table

        table4 = table4_comparison(timings, pd.read_csv(paper_dir / "quarl_table4_deployment.csv"))
        lines.append(table4_table(table4))
        written += write_table4(table4, timings, out_dir)
    everything = store.to_dataframe()
    statistics = seeded_statistics(everything, tolerance_pct)
    written += write_statistics_report(everything, out_dir, tolerance_pct, statistics)
    written += write_methods_report(statistics, everything, out_dir, tolerance_pct, verdicts)
    written += write_layer_report(everything, out_dir)
    written += write_fidelity_report(store.fidelity(), out_dir)
    written += write_actorq_report(everything, out_dir, paper_dir)
    written += write_rollout_report(everything, out_dir)
    written += write_amp_table(everything, out_dir, paper_dir)
    others = [v.label() for v in variants if v != primary]
    if others:
        lines.append(f"Other variants in the store, each in its own reward_error_table__*.md: {'; '.join(others)}")
    return lines + [f"wrote {path}" for path in written]
