"""The report's opening answer: certified verdicts as a grid, agents (and certification settings) x precisions.

Each cell is a stored verdict (``quarl-bench certify``): safe / unsafe / undetermined with the paired episodes it
took; the line's certified minimum is the narrowest precision safe with every wider one tried safe too. The rule is
the one ``certify`` applies (:func:`quarl_bench.statistics.certification.minimum_safe`), never recomputed here from
fixed-episode means.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from quarl_bench.report.tables import write_table
from quarl_bench.statistics.certification import minimum_safe
from quarl_bench.types import precision_bits

LINE = ("algo", "env_id", "agent_hash", "tolerance", "alpha", "seed")


def verdict_grid(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One line per agent and certification settings; one column per precision, widest first."""
    if verdicts.empty:
        return pd.DataFrame()
    frame = verdicts.assign(seed=[settings["seed"] for settings in verdicts["settings"]])
    order = sorted(set(frame["spec"]), key=lambda spec: (-precision_bits(spec.split()[0]), spec))
    records = []
    for values, line in frame.groupby(list(LINE), sort=True):
        cells = {row["spec"]: row for _, row in line.iterrows()}
        walked = [(spec, cells[spec]["verdict"]) for spec in order if spec in cells]
        record = {
            "algo": values[0],
            "env": values[1],
            "agent": str(values[2])[:8],
            "tolerance": values[3],
            "confidence": round(1 - float(values[4]), 3),
            "seed base": values[5],
            "certified minimum": minimum_safe(walked) or "none",
        }
        for spec in order:
            record[spec] = f"{cells[spec]['verdict']} ({cells[spec]['episodes']})" if spec in cells else "-"
        record["rows"] = " ".join(dict.fromkeys(key for row in cells.values() for key in row["rows"]))
        records.append(record)
    return pd.DataFrame.from_records(records)


def write_verdict_report(verdicts: pd.DataFrame, out_dir: Path) -> list[Path]:
    """``certified_verdicts.{csv,md}``; nothing when the store holds no verdict."""
    return write_table(verdict_grid(verdicts), out_dir, "certified_verdicts")
