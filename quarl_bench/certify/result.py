"""What a certify run answers: one :class:`Verdict` per spec, and the :class:`Certification` of an agent (its
families' certified minimums, as a frame or JSON). ``certify/plan.py`` decides them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quarl_bench.precision import precision_bits
from quarl_bench.statistics.certification import minimum_safe
from quarl_bench.statistics.wording import safe_width_text
from quarl_bench.types import AgentRef

VERDICT_FIELDS = ("precision", "spec", "verdict", "episodes", "mean", "lower", "upper", "delta", "alpha")


@dataclass(frozen=True)
class Verdict:
    """One precision's answer, with the episodes it took, the stored rows behind it and its evidence (guarantee,
    bounds, α shares, δ's bounds, the catastrophe rate's bound: :meth:`~quarl_bench.certify.plan.Certifier.certify`)."""

    precision: str
    spec: str
    verdict: str
    episodes: int
    mean: float
    lower: float
    upper: float
    delta: float
    alpha: float
    rows: tuple[str, ...] = ()
    reused: bool = False
    key: str = ""
    evidence: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @classmethod
    def from_row(cls, row: dict[str, Any], reused: bool = False) -> Verdict:
        """The verdict a verdicts-table row holds."""
        return cls(
            **{name: row[name] for name in VERDICT_FIELDS},
            rows=tuple(row["rows"]),
            reused=reused,
            key=row["key"],
            evidence=row.get("evidence") or {},
        )

    @property
    def guarantee(self) -> str:
        return str(self.evidence.get("guarantee", "asymptotic"))

    @property
    def exploratory(self) -> bool:
        return bool(self.evidence.get("exploratory"))

    def as_json(self) -> dict[str, Any]:
        """What the console's verdict line says, machine-readable: the answer with its pairs, mean and both interval
        ends, δ with its bounds, α and α per test, and what the question was (method, recipe, backend, outcome and its
        judge, condition, design, families), then every other field of its evidence (bounds, catastrophes)."""
        evidence = self.evidence
        walked = "walk" in evidence
        named = {
            "precision": self.spec,
            "verdict": self.verdict,
            "episodes": self.episodes,
            "pairs": self.episodes,
            "mean": self.mean,
            "lower": None if walked else self.lower,
            "upper": None if walked else self.upper,
            # the interval is the running intersection of a confidence sequence: the mean may lie outside it; the
            # finite-horizon test of success rates has none (a walk against its boundary: its walk, boundary fields)
            "interval": "none: a walk against its boundary"
            if walked
            else ("running intersection" if evidence.get("guarantee") else ""),
            "delta": self.delta,
            "delta_low": evidence.get("delta_low", self.delta),
            "delta_high": evidence.get("delta_high", self.delta),
            "alpha": self.alpha,
            "alpha_test": evidence.get("alpha_test"),
            "method": evidence.get("method", "ptq"),
            "recipe": evidence.get("recipe", ""),
            "backend": evidence.get("backend", ""),
            "outcome": evidence.get("outcome", "return"),
            "judge": evidence.get("judge", ""),
            "success_rule": evidence.get("success_rule"),
            "condition": evidence.get("perturbation") or "nominal",
            "design": evidence.get("design", "paired"),
            "families": evidence.get("families", 1),
            "guarantee": self.guarantee,
            "exploratory": self.exploratory,
            "reused": self.reused,
            "key": self.key,
        }
        return named | {name: value for name, value in evidence.items() if name not in named and name != "perturbation"}

    def catastrophe_text(self) -> str:
        """ "catastrophes ≤ 1.6% at 95%" (empty for a verdict stored without the bound)."""
        upper = self.evidence.get("catastrophe_rate_upper")
        if upper is None:
            source = self.evidence.get("catastrophe_source", "")
            return f"catastrophes {source}" if source.startswith("not computed") else ""
        return f"catastrophes ≤ {upper:.1%} at {1 - self.evidence['alpha_test']:.0%}"


@dataclass(frozen=True)
class Certification:
    """All verdicts of one certify run, family by family (see :func:`family`), each widest first, and the certified
    minimum safe precision of each family."""

    agent: AgentRef
    delta: float
    tolerance: str
    scale_rows: tuple[str, ...]
    verdicts: list[Verdict] = field(default_factory=list)
    family_of: dict[str, str] = field(default_factory=dict)  # verdict spec name -> its family's label

    @property
    def families(self) -> dict[str, str | None]:
        """Each family's certified minimum: the narrowest precision safe with every wider one of it safe. An
        exploratory verdict (past a walk's first stop, whenever it was computed) never enters it: its error rate is
        not covered by the walk's α."""
        walks: dict[str, list[tuple[str, str]]] = {}
        for found in self.verdicts:
            decided = "exploratory" if found.exploratory else found.verdict
            walks.setdefault(self.family_of.get(found.spec, ""), []).append((found.spec, decided))
        return {label: minimum_safe(walk) for label, walk in walks.items()}

    @property
    def main_family(self) -> str | None:
        """The family the headline minimum is read from: the plain integer ladder where certified, else the first
        family that is not the agent's own fp32 (certified against a parent), else the first."""
        families = list(self.families)
        if not families:
            return None
        if "int" in families:
            return "int"
        return next((label for label in families if label != "fp32"), families[0])

    @property
    def minimum_safe(self) -> str | None:
        """The headline family's certified minimum (see :attr:`main_family`)."""
        main = self.main_family
        return self.families.get(main) if main is not None else None

    @property
    def guarantee(self) -> str:
        """``finite-sample`` when every verdict carries it, else ``asymptotic``."""
        kinds = {v.guarantee for v in self.verdicts}
        return "finite-sample" if kinds == {"finite-sample"} else "asymptotic"

    @property
    def worded_minimums(self) -> dict[str, int | str]:
        """Each family's certified minimum in the report's words: ``≤ int4`` when the narrowest width tried is safe,
        ``> int8`` when not even the widest is (:func:`~quarl_bench.statistics.wording.safe_width_text`)."""
        minimum = self.families
        tried: dict[str, list[str]] = {}
        for v in self.verdicts:
            tried.setdefault(self.family_of.get(v.spec, ""), []).append(v.spec)
        bits = {v.spec: precision_bits(v.precision) for v in self.verdicts}
        return {label: safe_width_text(minimum.get(label), specs, bits.__getitem__) for label, specs in tried.items()}

    @property
    def minimum_safe_text(self) -> str:
        """:attr:`minimum_safe` in the report's words."""
        main = self.main_family
        return str(self.worded_minimums.get(main, "undetermined")) if main is not None else "undetermined"

    def frame(self) -> Any:
        """The verdicts as a flat frame, one row per precision, named as ``load_results`` names its columns."""
        import pandas as pd

        from quarl_bench.store.agent_names import agent_name

        ref = self.agent
        name = agent_name(ref.algo, ref.env_id, ref.source, ref.model_path, ref.content_hash, ref.env_kwargs)
        worded = self.worded_minimums
        return pd.DataFrame.from_records(
            [
                {
                    "agent": name,
                    "algo": ref.algo,
                    "env_id": ref.env_id,
                    "precision": v.spec,
                    "verdict": v.verdict,
                    "episodes": v.episodes,
                    "mean difference": v.mean,
                    "lower": v.lower,
                    "upper": v.upper,
                    "delta": v.delta,
                    "confidence": 1 - v.alpha,
                    "guarantee": v.guarantee,
                    "catastrophe rate upper": v.evidence.get("catastrophe_rate_upper"),
                    "exploratory": v.exploratory,
                    "certified minimum": worded[self.family_of.get(v.spec, "")],
                }
                for v in self.verdicts
            ]
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "agent": f"{self.agent.algo}/{self.agent.env_id}",
            "agent_hash": self.agent.content_hash,
            "minimum_safe": self.minimum_safe,
            **({"families": self.families} if len(self.families) > 1 else {}),
            "guarantee": self.guarantee,
            "delta": self.delta,
            "tolerance": self.tolerance,
            "verdicts": [v.as_json() for v in self.verdicts],
        }
