"""Deployment on the console: the artifacts of one agent (deploy) and QuaRL Table 4 next to this machine's timings."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from quarl_bench.report.console import format_number


def deployment_console_table(rows: list[dict[str, Any]], title: str) -> Table:
    """:func:`quarl_bench.report.deployment.deployment_table` of the stored rows: per backend, reward, E% and
    agreement vs the torch fp32 reference, latency, size, memory, ratios vs fp32."""
    import pandas as pd

    from quarl_bench.report.deployment import deployment_table as deployment_frame

    frame = deployment_frame(pd.DataFrame(rows), pd.DataFrame())
    episodes = f"{rows[0]['episodes']} episodes, seed {rows[0]['seed']}" if rows else "no rows"
    table = Table(title=f"{title}: {episodes}, batch-1 latency on 1 thread")
    columns = ("backend", "reward", "E %", "agreement", "p50 ms", "p99 ms", "bytes", "peak MB", "speed-up", "smaller")
    for column in columns:
        table.add_column(column, justify="left" if column == "backend" else "right")
    for _, row in frame.iterrows():
        table.add_row(
            row["backend"],
            f"{row['reward']:.2f} ± {row['std']:.2f}",
            format_number(row["E %"], "{:+.2f}"),
            agreement_cell(row),
            f"{row['p50 ms']:.3f}",
            f"{row['p99 ms']:.3f}",
            str(row["bytes"]),
            format_number(row["peak MB"], "{:.0f}"),
            f"{row['speed-up']:.2f}x",
            size_text(row["size ratio"], row["size base"], row["backend"]),
        )
    table.caption = "speed-up: against torch-fp32; smaller: the file against the same runtime's fp32 file"
    machines = {timed_on(row) for row in rows}
    if machines:
        table.caption += f"; timed on {'; '.join(sorted(machines))}"
    return table


def timed_on(row: dict[str, Any]) -> str:
    """The CPU a deploy row was timed on and its int8 features (rows older than the record: 'CPU not recorded')."""
    machine = ((row.get("provenance") or {}).get("deployment") or {}).get("machine")
    if not machine:
        return "CPU not recorded"
    return f"{machine['cpu']} ({machine['cpu_kind']}: {' '.join(machine['int8_features']) or 'no int8 features'})"


def agreement_cell(row: Any) -> str:
    """Equal actions (discrete), or the action error as a share of the action range (continuous)."""
    error = row.get("action error % range")
    if error is not None and error == error:
        return f"{error:.2f} % range"
    return format_number(row["agreement"], "{:.3f}")


def size_text(ratio: float, base: str, backend: str) -> str:
    """How much smaller a file is than its fp32 base: ``1.78x``, ``-`` for the base itself or none, ``grew 13%``."""
    if backend == base or ratio != ratio:
        return "-"
    return f"{ratio:.2f}x" if ratio >= 1 else f"grew {1 / ratio - 1:.0%}"


def table4_table(comparison: Any) -> Table:
    """QuaRL Table 4 (the paper's RasPi) next to this machine's stored timings (``table4_comparison``)."""
    machines = sorted(set(comparison["machine"])) if len(comparison) else []
    table = Table(
        title=f"QuaRL Table 4: paper (RasPi-3b+, its 4x ARM A53) vs here ({'; '.join(machines) or 'nothing timed'}); "
        "fp32 = torch fp32, int8 = fastest int8 backend, p50 ms",
        caption="paper: its speed-up; size: the fastest int8 file against its own runtime's fp32 file (peak memory "
        "and the paper's ms in table4.md)"
        + (
            "; * timed while the load exceeded the cores (busy): rerun on a quiet machine before quoting it"
            if "busy" in comparison.columns and comparison["busy"].any()
            else ""
        ),
    )
    columns = ("policy", "int8 CPU", "paper", "fp32 ms", "int8 ms", "int8 backend", "speed-up", "vs ORT fp32", "size")
    for column in columns:
        table.add_column(column, justify="left" if column in ("policy", "int8 backend") else "right")
    for _, row in comparison.iterrows():
        table.add_row(
            f"{row['policy'].removeprefix('Policy ')} ({row['hidden']})",
            cpu_kind_of(row["machine"]),
            format_number(row["paper speed-up"], "{:.2f}x"),
            f"{row['fp32 ms']:.3f}" + ("*" if row.get("busy") else ""),
            format_number(row["int8 ms"], "{:.3f}"),
            str(row["int8 backend"]),
            format_number(row["speed-up"], "{:.2f}x"),
            format_number(row["vs ORT fp32"], "{:.2f}x"),
            format_number(row["size ratio"], "{:.2f}x"),
        )
    return table


def cpu_kind_of(machine: str) -> str:
    """The int8 kind in a Table 4 machine string (``... int8 x86-vnni (...)``); rows older than it: 'not recorded'."""
    import re

    found = re.search(r"int8 (\S+) \(", machine)
    return found.group(1) if found else "not recorded"
