"""The report's sections, registered in page order with the methods whose rows each reads.

A section is a function from :class:`ReportInput` (the store and what the sections share: the verdicts, the PTQ
variants and the primary one's rows, every row, the seeded statistics) to report objects. ``report`` writes every
registered section; the methods some section reads are derived from the registrations, and rows of any other
method are named in the report's notes. A method's report section is one decorated function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from quarl_bench.report.objects import Item, Table
from quarl_bench.store import ResultStore, Variant


@dataclass
class ReportInput:
    """What the sections read: the store, and the frames several of them share (read once, on first use)."""

    store: ResultStore
    paper_dir: Path
    tolerance_pct: float
    all_files: bool
    variant_rows: dict[Variant, pd.DataFrame]
    notes: list[str] = field(default_factory=list)

    @cached_property
    def verdicts(self) -> pd.DataFrame:
        return self.store.verdicts()

    @cached_property
    def variants(self) -> list[Variant]:
        return self.store.variants("ptq") or [Variant()]

    @property
    def primary(self) -> Variant:
        return self.variants[0]

    @cached_property
    def default(self) -> pd.DataFrame:
        """The primary PTQ variant's rows (figures and comparisons use them)."""
        self.variant_rows[self.primary] = self.store.select(self.primary)
        return self.variant_rows[self.primary]

    @cached_property
    def everything(self) -> pd.DataFrame:
        return self.store.to_dataframe()

    @cached_property
    def statistics(self) -> pd.DataFrame:
        from quarl_bench.report.statistics import seeded_statistics

        return seeded_statistics(self.everything, self.tolerance_pct)


Writer = Callable[[ReportInput], list[Item]]


@dataclass(frozen=True)
class Section:
    name: str
    reads: tuple[str, ...]  # the methods whose result rows it reads (side tables: none)
    write: Writer


SECTION_WRITERS: list[Section] = []


def report_section(reads: tuple[str, ...] = ()) -> Callable[[Writer], Writer]:
    """Register a section writer (page order: registration order), with the methods whose rows it reads."""

    def register(write: Writer) -> Writer:
        SECTION_WRITERS.append(Section(write.__name__, reads, write))
        return write

    return register


def reported_methods() -> tuple[str, ...]:
    """Every method some registered section reads."""
    return tuple(dict.fromkeys(method for section in SECTION_WRITERS for method in section.reads))


OTHER_COLUMNS = (
    *("method", "agent", "precision", "recipe", "seed", "episodes", "mean_reward", "std_reward"),
    *("fp32_reward", "error_pct", "key"),
)


def other_methods(inputs: ReportInput) -> list[Item]:
    """The rows of methods no registered section reads, one line each (the report's last section): a new method
    is in the report before it has a section of its own."""
    everything = inputs.everything
    unread = everything[~everything["method"].isin(reported_methods())] if len(everything) else everything
    if not len(unread):
        return []
    counts = unread["method"].value_counts().sort_index()
    named = ", ".join(f"{method} ({count} rows)" for method, count in counts.items())
    inputs.notes.append(f"Other methods: no section of its own reads the rows of method {named}; listed one per line")
    frame = unread[list(OTHER_COLUMNS)].sort_values(["method", "agent", "precision", "seed"], ignore_index=True)
    caption = "Rows of methods without a section of their own (E % against each row's own fp32 reference)"
    return [Table("other_methods", "Other methods", frame, caption, console=True)]


@report_section()
def verdicts(inputs: ReportInput) -> list[Item]:  # the answer first: certified verdicts, agents x precisions
    from quarl_bench.report.hardened import hardening_report
    from quarl_bench.report.verdicts import verdict_report

    store = inputs.store
    return [*verdict_report(inputs.verdicts), *hardening_report(store.hardened(), inputs.verdicts, store.agent_names())]


@report_section(reads=("ptq",))
def papers_cell_by_cell(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.paper_page import paper_page_report

    # every PTQ variant, each row labelled: a paper row takes its cells from one variant and one agent, the one with
    # the most of its precisions (after `reproduce --quick` beside a full run, the quick cells are found too)
    frames = [inputs.store.select(v).assign(variant=v.label()) for v in inputs.variants]
    selected = (
        pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else inputs.default
    )
    return [*paper_page_report(selected, inputs.paper_dir, inputs.notes, inputs.everything)]


@report_section(reads=("ptq", "mixed", "random"))
def methods_and_figures(inputs: ReportInput) -> list[Item]:
    """Figures first, the slowest soonest: they draw in other processes while the tables compute."""
    from quarl_bench.report.layers import layer_report
    from quarl_bench.report.methods import methods_report
    from quarl_bench.report.plots import sweet_spot_figures, weight_figures
    from quarl_bench.report.statistics import statistics_report
    from quarl_bench.report.verdicts import is_own_fp32

    verdicts, everything, tolerance = inputs.verdicts, inputs.everything, inputs.tolerance_pct
    certified = verdicts[verdicts["settings"].map(is_own_fp32)] if len(verdicts) else verdicts
    return [
        *methods_report(inputs.statistics, everything, tolerance, certified),
        *sweet_spot_figures(inputs.default, inputs.statistics, tolerance),
        *weight_figures(inputs.default),
        *statistics_report(everything, tolerance, inputs.statistics),
        *layer_report(everything),
    ]


@report_section()
def outcomes(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.outcomes import outcome_report
    from quarl_bench.report.robustness import robustness_report

    return [*outcome_report(inputs.everything), *robustness_report(inputs.everything)]


@report_section()
def fidelity(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.divergence import fidelity_report

    return fidelity_report(inputs.store.fidelity())


@report_section(reads=("actorq",))
def actorq(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.actorq import actorq_report

    return actorq_report(inputs.everything, inputs.paper_dir)


@report_section(reads=("rollout",))
def rollouts(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.rollout import rollout_report

    return rollout_report(inputs.everything)


@report_section(reads=("ptq", "mixed"))
def reward_error_per_variant(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.tables import reward_error_report, reward_error_table, weight_spread_report
    from quarl_bench.report.tidy import reward_error_shapes

    verdicts, items = inputs.verdicts, []
    behind_verdicts = {key for keys in verdicts["rows"] for key in keys} if len(verdicts) else set()
    for variant in inputs.variants:
        frame = inputs.default if variant == inputs.primary else inputs.store.select(variant)
        inputs.variant_rows[variant] = frame
        batches = len(frame) and set(frame["key"]) <= behind_verdicts
        table = reward_error_table(frame)
        if not table.empty and (inputs.all_files or not batches or variant == inputs.primary):
            items += [reward_error_report(table, variant.slug(), variant.label())]
            items += reward_error_shapes(frame, variant.slug(), variant.label())
    inputs.notes.append(f"Figures and comparisons use the variant: {inputs.primary.label()}")
    others = [v.label() for v in inputs.variants if v != inputs.primary]
    if others:
        inputs.notes.append(
            f"Other variants in the store, each in its own reward_error_table__*.md: {'; '.join(others)}"
        )
    return [*items, *weight_spread_report(inputs.default)]


@report_section(reads=("qat",))
def qat_against_ptq(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.plots import qat_figures
    from quarl_bench.report.tables import qat_vs_ptq_table

    qat_variants = inputs.store.variants("qat")
    if not qat_variants:
        return []
    qat_vs_ptq = qat_vs_ptq_table(inputs.store.select(qat_variants[0]), inputs.default)
    return [Table("qat_vs_ptq", "QAT against PTQ", qat_vs_ptq), *qat_figures(qat_vs_ptq)] if len(qat_vs_ptq) else []


@report_section(reads=("ptq",))
def paper_vs_measured(inputs: ReportInput) -> list[Item]:
    """Absolute rewards next to the papers' (different agents: the paper page judges E %, this shows the rewards)."""
    from quarl_bench.report.tables import paper_reference, paper_vs_measured

    paper = paper_reference(inputs.paper_dir)
    comparisons = [
        paper_vs_measured(inputs.store.select(replace(inputs.primary, layers=mode)), paper, mode)
        for mode in ("paper", "quarl-code")
    ]
    comparisons = [c for c in comparisons if not c.empty]
    if not comparisons:
        return []
    return [Table("paper_vs_measured", "Paper vs measured", pd.concat(comparisons, ignore_index=True))]


@report_section(reads=("deploy",))
def deployment(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.deployment import deployment_report, deployment_table, table4_comparison, table4_report

    store = inputs.store
    tables = [
        deployment_table(store.select(v), store.select(Variant("ptq", v.seed, v.episodes)))
        for v in store.variants("deploy")
    ]
    items: list[Any] = deployment_report(pd.concat(tables, ignore_index=True) if tables else pd.DataFrame())
    timings = store.timings()
    if len(timings):
        table4 = table4_comparison(timings, pd.read_csv(inputs.paper_dir / "quarl_table4_deployment.csv"))
        items += table4_report(table4, timings)
    return items


@report_section(reads=("amp",))
def mixed_precision_training(inputs: ReportInput) -> list[Item]:
    from quarl_bench.report.tables import amp_report

    return [*amp_report(inputs.everything, inputs.paper_dir)]
