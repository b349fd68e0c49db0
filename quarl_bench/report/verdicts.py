"""The report's opening answer: certified verdicts as a grid, agents (and certification settings) x precisions.

Each cell is a stored verdict (``quarl-bench certify``): safe / unsafe / undetermined with the paired episodes it
took; the line's certified minimum is the narrowest precision safe with every wider one tried safe too. The rule is
the one ``certify`` applies (:func:`quarl_bench.statistics.certification.minimum_safe`), never recomputed here from
fixed-episode means.
"""

from __future__ import annotations

import pandas as pd

from quarl_bench.certify.outcome import success_rule
from quarl_bench.precision import precision_bits
from quarl_bench.report.objects import Table
from quarl_bench.statistics.certification import family, minimum_safe
from quarl_bench.statistics.wording import safe_width_text
from quarl_bench.store.agent_names import name_of
from quarl_bench.store.question import with_verdict_questions
from quarl_bench.store.spec_kinds import method_of, spec_of
from quarl_bench.types import QuantSpec

# A line is one walk: one verdict question (store/question.py: everything a verdict's key is made of but its
# precision) and the family it walks; no line keeps a tuple of its own.
LINE = ("question", "family")


def _column(spec: QuantSpec) -> str:
    """A verdict's column: its precision, or its per-layer allocation."""
    return "/".join(spec.layer_precisions) if spec.layer_precisions else spec.precision


def verdict_grid(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One line per agent, family (the ladder certify walks: integers with their grid and recipe, or one float
    format family, see :func:`~quarl_bench.statistics.certification.family`) and certification settings; one column
    per precision, widest first. A line's certified minimum walks its own precisions from the widest down, as
    ``certify`` does."""
    if verdicts.empty:
        return pd.DataFrame()
    frame = with_verdict_questions(verdicts).assign(
        seed=[settings["seed"] for settings in verdicts["settings"]],
        method=[method_of(fields) for fields in verdicts["spec_json"]],
        outcome=[outcome_of(settings) for settings in verdicts["settings"]],
        condition=[condition_of(settings) for settings in verdicts["settings"]],
        family=[family(spec_of(fields)) for fields in verdicts["spec_json"]],
        column=[_column(spec_of(fields)) for fields in verdicts["spec_json"]],
    )
    narrowest = dict(zip(frame["column"], frame["precision"], strict=True))
    order = sorted(narrowest, key=lambda column: (-precision_bits(narrowest[column]), column))
    records = []
    for _, line in frame.groupby(list(LINE), sort=False):
        line_of = line.iloc[0]
        cells = {row["column"]: row for _, row in line.iterrows()}
        walked = [(column, cells[column]["verdict"]) for column in order if column in cells]
        safe = minimum_safe(walked)
        record = {
            "algo": line_of["algo"],
            "env": line_of["env_id"],
            "agent": name_of(line.iloc[0]),
            "method": line_of["method"],
            "outcome": line_of["outcome"],
            "condition": line_of["condition"],
            "family": line_of["family"],
            # δ as a number: its rule ("5% of (R_fp32 98.64 - R_random -218.33)") sits at the line's end, so the
            # precision columns stay in a laptop's window
            "δ": round(float(line["delta"].iloc[0]), 3),
            "confidence": round(1 - float(line_of["alpha"]), 3),
            "seed base": line_of["seed"],
            "guarantee": _guarantee(line),
            "certified minimum": safe_width_text(safe, [c for c, _ in walked], lambda p: precision_bits(narrowest[p])),
            "catastrophes at the minimum": _catastrophe_bound(cells.get(safe)) if safe else "-",
        }
        for column in order:
            record[column] = _cell(cells[column]) if column in cells else "-"
        record["tolerance"] = line_of["tolerance"]
        record["question"] = line_of["question label"]  # what sets it apart from the agent's other lines
        record["rows"] = " ".join(dict.fromkeys(key for row in cells.values() for key in row["rows"]))
        records.append(record)
    order = ["algo", "env", "agent", "method", "outcome", "condition", "family", "tolerance", "confidence", "seed base"]
    return pd.DataFrame.from_records(records).sort_values(order, kind="stable").reset_index(drop=True)


def outcome_of(settings: dict) -> str:
    """What a verdict certified: ``return``, ``success (ran to its time limit)``, ``progress`` or ``cost``, and
    ``, unpaired`` when the two policies played independent episodes (a line of its own)."""
    outcome = settings.get("outcome", "return")  # verdicts stored before outcomes certified the return
    text = f"success ({success_rule(settings.get('success', 'info'))})" if outcome == "success" else outcome
    if outcome == "progress" and settings.get("progress", "info") != "info":
        text = f"progress ({settings['progress']})"
    text += ", equivalence" if settings.get("equivalence") else ""
    return text + (", unpaired" if settings.get("unpaired") else "")


def condition_of(settings: dict) -> str:
    """What a verdict was played under: its ``--perturb`` condition, or ``nominal``."""
    return settings.get("perturb") or "nominal"


def _evidence(row: pd.Series) -> dict:
    evidence = row.get("evidence")
    return evidence if isinstance(evidence, dict) else {}


def _guarantee(line: pd.DataFrame) -> str:
    """The line's guarantee: ``finite-sample`` when every verdict carries it, else ``asymptotic``."""
    kinds = {_evidence(row).get("guarantee", "asymptotic") for _, row in line.iterrows()}
    return "finite-sample" if kinds == {"finite-sample"} else "asymptotic"


def _catastrophe_bound(row: pd.Series | None) -> str:
    """ "≤ 3.5%": the upper bound on the catastrophe rate of a verdict ("-" for one stored without it)."""
    evidence = _evidence(row) if row is not None else {}
    upper = evidence.get("catastrophe_rate_upper")
    if upper is None:
        return "not computed" if str(evidence.get("catastrophe_source", "")).startswith("not computed") else "-"
    return f"≤ {100 * upper:.1f}%"


def _cell(row: pd.Series) -> str:
    """``safe (100)``, with ``, exploratory`` for a verdict past its walk's first stop (``--every-width``)."""
    exploratory = ", exploratory" if _evidence(row).get("exploratory") else ""
    return f"{row['verdict']} ({row['episodes']}{exploratory})"


def is_equivalence(settings: dict) -> bool:
    """Whether a verdict is an exported artifact's closed loop (``export``: equivalence to its fake-quant policy,
    or non-inferiority to fp32), not a precision's safety against fp32 (``certify``)."""
    return settings.get("test") in ("equivalence", "non-inferiority")


def artifact_certifications(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One line per exported artifact's certification: the backend against the fake-quant spec it claims."""
    records = []
    for _, row in verdicts.iterrows():
        backend = row["spec_json"].get("backend", "")
        records.append(
            {
                "algo": row["algo"],
                "env": row["env_id"],
                "agent": name_of(row),
                "backend": backend,
                "against": _claimed(row["settings"]["reference"]),
                "test": row["settings"]["test"],
                "verdict": row["verdict"],
                "episodes": row["episodes"],
                "guarantee": _evidence(row).get("guarantee", "asymptotic"),
                "mean artifact - reference": round(float(row["mean"]), 3),
                "lower": round(float(row["lower"]), 3),
                "upper": round(float(row["upper"]), 3),
                "δ": round(float(row["delta"]), 3),
                "rows": " ".join(row["rows"]),
            }
        )
    return pd.DataFrame.from_records(records)


def _claimed(fields: dict) -> str:
    spec = spec_of(fields)
    if spec.is_identity:
        return "fp32"
    parts = [spec.precision, spec.granularity if spec.granularity != "auto" else ""]
    return " ".join(part for part in [*parts, "symmetric" if spec.symmetric else "", spec.recipe_label()] if part)


def is_own_fp32(settings: dict) -> bool:
    """Whether a verdict is ``certify``'s: a precision against the agent's own fp32 (not an artifact's equivalence,
    nor a hardened agent against its parent's fp32, which the hardened-agents section shows)."""
    return not is_equivalence(settings) and not settings.get("baseline")


def verdict_report(verdicts: pd.DataFrame) -> list[Table]:
    """``certified_verdicts``, first on the console and the page, and ``artifact_certifications`` (export's
    equivalence verdicts) where there are any; nothing when the store holds no verdict."""
    if verdicts.empty:
        return []
    verdicts = verdicts[[not settings.get("baseline") for settings in verdicts["settings"]]]
    if verdicts.empty:
        return []
    artifacts = verdicts["settings"].map(is_equivalence)
    tables = []
    if (~artifacts).any():
        caption = "Certified verdicts (paired episodes per decision in brackets)"
        grid = verdict_grid(verdicts[~artifacts])
        tables.append(Table("certified_verdicts", "Certified verdicts", grid, caption, console=True))
    if artifacts.any():
        caption = (
            "Exported artifacts certified against the fake-quant policy each claims to be (equivalent when the "
            "mean paired difference's confidence sequence lies within ±δ) and against fp32 (safe when it lies "
            "above -δ: does the deployed policy still work?)"
        )
        frame = artifact_certifications(verdicts[artifacts])
        tables.append(Table("artifact_certifications", "Artifact certifications", frame, caption, console=True))
    return tables
