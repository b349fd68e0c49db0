"""``reproduce``'s plan on the console: one line per artifact, with what it covers and what it costs."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from quarl_bench.progress import clock


def plan_table(lines: list[Any], chosen: list[Any], quick: bool) -> Table:
    """Artifact, published cells, agents here / missing, jobs to run and already stored, estimate, run or not."""
    table = Table(title=f"Reproduction plan ({'quick: tiny sizes' if quick else 'full'})")
    for column in ("artifact", "published", "agents here", "missing", "to run", "stored", "estimate", "from", "runs"):
        table.add_column(column, justify="left" if column in ("artifact", "runs") else "right")
    for line in lines:
        table.add_row(
            f"{line.artifact.name}: {line.artifact.paper}",
            str(line.published_cells or "-") + (f" ({line.cells_here} here)" if line.cells_here is not None else ""),
            str(len(line.agents)) if line.artifact.grid else "-",
            str(len(line.missing)) if line.artifact.grid else "-",
            str(line.jobs_to_run) if line.artifact.grid else "-",
            str(line.already_stored) if line.artifact.grid else "-",
            clock(line.seconds),
            line.estimate_from,
            "yes" if line in chosen else "left out",
        )
    total = sum(line.seconds for line in chosen)
    table.caption = f"estimated {clock(total)} for what runs on this machine"
    return table
