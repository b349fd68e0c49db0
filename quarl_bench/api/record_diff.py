"""A record as data, and two records side by side: ``record``'s tidy verdicts (what ``record_verdicts.csv`` holds)
and ``record diff OLD NEW``, which joins them on each verdict's question and compares the whole evidence."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quarl_bench.errors import QuarlError


def tidy_record(verdicts: pd.DataFrame) -> pd.DataFrame:
    """A record's verdicts as a tidy frame (one row per verdict): what ``record diff`` compares, from a store's
    verdicts table. ``question`` is the verdict's question as asked (store/question.py: the agent, the spec less its
    precision, the method that played it, every certification setting; δ is evidence, compared beside the pairs),
    and every machine-readable field of the console's verdict line is a column: method, recipe, outcome and its
    judge, condition, design, families, α per test, δ with its bounds, pairs, mean and both interval ends."""
    from quarl_bench.report.verdicts import condition_of, outcome_of
    from quarl_bench.statistics.certification import family
    from quarl_bench.store.question import verdict_question
    from quarl_bench.store.spec_kinds import method_of, spec_of

    rows = []
    for verdict in verdicts.to_dict("records"):
        provenance = verdict.get("provenance") if isinstance(verdict.get("provenance"), dict) else {}
        evidence = verdict.get("evidence") if isinstance(verdict.get("evidence"), dict) else {}
        settings = verdict.get("settings") or {}
        spec = spec_of(verdict["spec_json"]) if verdict.get("spec_json") else None
        rows.append(
            {
                "question": verdict_question(verdict, measured=False),
                "algo": verdict["algo"],
                "env": verdict["env_id"],
                "agent": verdict["agent_hash"][:12],
                "method": method_of(verdict["spec_json"]) if verdict.get("spec_json") else "ptq",
                "family": family(spec) if spec is not None else "",
                "recipe": spec.recipe_label() if spec is not None else "",
                "outcome": outcome_of(settings),
                "condition": condition_of(settings),
                "design": evidence.get("design") or ("unpaired" if settings.get("unpaired") else "paired"),
                "spec": verdict["spec"],
                "verdict": verdict["verdict"],
                "exploratory": bool(evidence.get("exploratory")),
                "episodes": int(verdict["episodes"]),
                "mean": float(verdict["mean"]),
                "lower": float(verdict["lower"]),
                "upper": float(verdict["upper"]),
                "delta": float(verdict["delta"]),
                "delta_low": _number(evidence.get("delta_low")),
                "delta_high": _number(evidence.get("delta_high")),
                "alpha": float(verdict["alpha"]),
                "alpha_test": _number(evidence.get("alpha_test")),
                "families": int(evidence.get("families") or 1),
                "versions": ", ".join(f"{k} {v}" for k, v in sorted((provenance.get("versions") or {}).items())),
                "cpu_kind": provenance.get("cpu_kind", "not recorded"),
                "commit": provenance.get("git_commit", ""),
            }
        )
    return pd.DataFrame(rows)


def _number(value: Any) -> float:
    return float(value) if value is not None else math.nan


def read_record(source: Path) -> pd.DataFrame:
    """A tidy record from a store (its verdicts) or from a record CSV (``record.csv``).

    :raises QuarlError: for a path that is neither.
    """
    from quarl_bench.store import ResultStore

    source = Path(source)
    if source.suffix == ".csv" and source.is_file():
        return pd.read_csv(source, keep_default_na=False)
    if source.is_file():
        with ResultStore(source) as store:
            return tidy_record(store.verdicts())
    raise QuarlError(f"bad record {str(source)!r}: expected a results store (.sqlite) or a record CSV")


@dataclass(frozen=True)
class RecordDiff:
    """What moved between two records: verdicts that changed (both sides' evidence), ones only one side has, and
    the versions and CPU kinds the two were made with."""

    changed: pd.DataFrame
    only_old: pd.DataFrame
    only_new: pd.DataFrame
    versions: tuple[str, str]
    cpu_kinds: tuple[str, str]
    same_verdict_other_evidence: int = 0  # the same verdict on other pairs or another interval
    identical: int = 0  # the same verdict, pairs and interval

    def version_changes(self) -> list[str]:
        """The packages whose versions differ, ``numpy 2.4.6 -> 2.3.5`` (a side that holds several: as written)."""
        old, new = (dict(_package(part) for part in side.split(", ") if part) for side in self.versions)
        return [
            f"{name} {old.get(name, '-')} -> {new.get(name, '-')}"
            for name in sorted(old | new)
            if old.get(name) != new.get(name)
        ]

    @property
    def confirmatory_changes(self) -> int:
        """Changed verdicts that were confirmatory on either side (not past a walk's first stop)."""
        if self.changed.empty:
            return 0
        return int(
            (~(self.changed["exploratory_old"].astype(bool) & self.changed["exploratory_new"].astype(bool))).sum()
        )


# the evidence behind a verdict, compared whole between two records (δ's bounds where both sides carry them)
EVIDENCE = ("episodes", "mean", "lower", "upper", "delta", "delta_low", "delta_high")


def diff_records(old: pd.DataFrame, new: pd.DataFrame) -> RecordDiff:
    """Join two tidy records on each verdict's question and spec (records written before questions: on agent,
    spec and condition), and name what differs: the verdict, or any part of its evidence."""
    if "question" in old and "question" in new:
        keys = ["question", "spec"]
    else:
        keys = ["algo", "env", "agent", "spec"] + (["condition"] if "condition" in old and "condition" in new else [])
    named = ["algo", "env", "agent", "condition"]
    joined = old.merge(new, on=keys, how="outer", suffixes=("_old", "_new"), indicator=True)
    for name in named:  # a key of the join keeps its one name; the others are read from whichever side has them
        if name not in keys and f"{name}_old" in joined:
            joined[name] = joined[f"{name}_old"].where(joined[f"{name}_old"].notna(), joined.get(f"{name}_new"))
    both = joined[joined["_merge"] == "both"]
    changed = both[both["verdict_old"] != both["verdict_new"]]
    compared = [name for name in EVIDENCE if f"{name}_old" in both and f"{name}_new" in both]
    shown = [*dict.fromkeys([*keys, *[n for n in named if n in joined]]), "verdict_old", "verdict_new"]
    shown += [f"{name}_{side}" for name in compared for side in ("old", "new")]
    shown += ["exploratory_old", "exploratory_new"]
    kept = both[both["verdict_old"] == both["verdict_new"]]
    moved = np.zeros(len(kept), dtype=bool)
    for name in compared:
        moved |= ~np.isclose(
            kept[f"{name}_old"].astype(float), kept[f"{name}_new"].astype(float), rtol=0, atol=1e-9, equal_nan=True
        )
    sides = [n for n in dict.fromkeys([*keys, *named]) if n in joined]
    return RecordDiff(
        changed[shown].reset_index(drop=True),
        joined[joined["_merge"] == "left_only"][sides].reset_index(drop=True),
        joined[joined["_merge"] == "right_only"][sides].reset_index(drop=True),
        (_one(old, "versions"), _one(new, "versions")),
        (_one(old, "cpu_kind"), _one(new, "cpu_kind")),
        int(moved.sum()),
        len(kept) - int(moved.sum()),
    )


def _package(text: str) -> tuple[str, str]:
    name, _, version = text.rpartition(" ")
    return (name, version) if name else (text, "")


def _one(frame: pd.DataFrame, column: str) -> str:
    values = sorted({str(v) for v in frame.get(column, pd.Series(dtype=str)) if str(v)})
    return "; ".join(values) if values else "not recorded"
