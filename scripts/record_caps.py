"""The pairs an undetermined verdict of the record would take, from its own stored interval.

For each undetermined row of the verdict CSVs (``record_verdicts.csv``): the side its mean lies on against −δ_low
(δ where an older CSV has no δ_low), and the pairs its interval would need to clear −δ_low on that side if its
half-width there shrinks as 1/√n from what its pairs gave (the betting interval's log factor shrinks it a little
slower: read these as lower bounds), at the record's δ and at twice it.
Run: python scripts/record_caps.py docs/results-of-record/record_verdicts.csv [--env BipedalWalker-v3 ...]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd


def pairs_to_decide(pairs: int, mean: float, lower: float, upper: float, bound: float) -> tuple[str, float]:
    """The side (``safe`` when the mean lies above ``-bound``) and the pairs at which the interval clears it."""
    if mean > -bound:
        half, margin = mean - lower, mean + bound
        return "safe", pairs * (half / margin) ** 2
    half, margin = upper - mean, -bound - mean
    return "unsafe", pairs * (half / margin) ** 2 if margin > 0 else math.inf


def caps(table: pd.DataFrame) -> pd.DataFrame:
    lines = []
    for _, row in table[table["verdict"] == "undetermined"].iterrows():
        bound = float(row["delta_low"]) if "delta_low" in row and pd.notna(row.get("delta_low")) else row["delta"]
        side, pairs = pairs_to_decide(int(row["episodes"]), row["mean"], row["lower"], row["upper"], bound)
        wide_side, wide = pairs_to_decide(int(row["episodes"]), row["mean"], row["lower"], row["upper"], 2 * bound)
        lines.append(
            {
                "algo": row["algo"],
                "env": row["env"],
                "condition": row.get("condition", "nominal"),
                "variant": row["spec"],
                "mean q - fp32": f"{row['mean']:+.1f}",
                f"interval at {int(row['episodes']):,} pairs": f"[{row['lower']:.1f}, {row['upper']:.1f}]",
                "-δ_low": f"{-bound:.1f}",
                "side": side,
                "pairs it would take (δ)": f"~{pairs:,.0f}",
                "at 2δ": f"~{wide:,.0f} ({wide_side})",
            }
        )
    return pd.DataFrame(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("verdicts", nargs="+", type=Path, help="record_verdicts.csv files")
    parser.add_argument("--env", nargs="*", default=None, help="only these envs")
    args = parser.parse_args()
    table = pd.concat([pd.read_csv(path) for path in args.verdicts], ignore_index=True)
    if args.env:
        table = table[table["env"].isin(args.env)]
    print(caps(table).to_markdown(index=False))


if __name__ == "__main__":
    main()
