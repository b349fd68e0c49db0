"""The plan before a campaign's first trial (``quarl-bench trials plan``): for the success rates the user expects (a
sim certification's, where there is one), the chance of each verdict by the cap and the pairs to expect, from the
campaign's own test (exact for the finite-horizon one, simulated on the test itself for the betting ones)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quarl_bench.api.trials import TrialSettings
from quarl_bench.errors import QuarlError


@dataclass(frozen=True)
class SimulatedRates:
    """The rates a sim certification measured: one stored success verdict's, and the agreement of its pairs."""

    key: str
    what: str  # agent, precision and condition, as a person reads them
    reference_rate: float
    candidate_rate: float
    agreement: float | None  # None for an unpaired verdict
    pairs: int

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "verdict": self.what, "pairs": self.pairs}

    def line(self) -> str:
        alike = f", {self.agreement:.3f} of pairs alike" if self.agreement is not None else ", unpaired"
        return (
            f"from verdict {self.key[:12]} ({self.what}): reference {self.reference_rate:.3f}, candidate "
            f"{self.candidate_rate:.3f} over {self.pairs} pairs{alike}"
        )


def rates_from_store(path: Path, key: str | None, candidate: str | None) -> SimulatedRates:
    """The success verdict of ``path``'s store a plan starts from: the one whose key starts with ``key``, else the one
    of precision ``candidate``.

    :raises QuarlError: for a store with no such verdict, or several (naming their keys).
    """
    from quarl_bench.report.verdicts import condition_of
    from quarl_bench.store import ResultStore

    if not path.is_file():
        raise QuarlError(
            f"bad --from {str(path)!r}: no such store (certify --outcome success --store STORE writes one)"
        )
    verdicts = ResultStore(path).verdicts()
    rated = [row for _, row in verdicts.iterrows() if "reference_successes" in (row["evidence"] or {})]
    chosen = [
        r for r in rated if (r["key"].startswith(key) if key else candidate is None or r["precision"] == candidate)
    ]
    if len(chosen) != 1:
        listed = chosen or rated  # the ambiguous ones, or every success verdict there is
        named = ", ".join(f"{r['key'][:12]} ({r['precision']}, {condition_of(r['settings'])})" for r in listed[:8])
        which = f"key {key!r}" if key else f"precision {candidate!r}" if candidate else "any precision"
        raise QuarlError(
            f"bad --from {str(path)!r}: {len(chosen)} success verdicts match {which}; expected one (pass --key): "
            + (named or "the store has no success verdict (certify --outcome success)")
        )
    row = chosen[0]
    evidence, pairs = row["evidence"], int(row["evidence"]["outcome_pairs"])
    paired = evidence.get("design", "paired") == "paired"
    return SimulatedRates(
        str(row["key"]),
        f"{row['agent']} {row['precision']} {condition_of(row['settings'])}",
        evidence["reference_successes"] / pairs,
        evidence["quantized_successes"] / pairs,
        1 - int(evidence.get("nonzero_pairs", 0)) / pairs if paired else None,
        pairs,
    )


def expected_trials(
    settings: TrialSettings,
    reference_rate: float,
    candidate_rate: float,
    agreement: float | None = None,
    sequences: int = 2000,
) -> dict[str, float]:
    """The plan before the first trial: simulated on the test itself, for success rates the user expects (a sim
    certification's, where there is one): P(safe), P(unsafe) by the cap, and the pairs spent (mean, median).

    :param agreement: paired only: the share of trials both policies end alike (default: as independent trials).
    :raises QuarlError: for rates outside [0, 1] or an agreement the rates cannot have.
    """
    from quarl_bench.statistics.certification import SequentialTest
    from quarl_bench.statistics.trial_counts import paired, simulate, unpaired

    if settings.outcome != "success":
        raise QuarlError(f"bad plan for a {settings.outcome}: the plan simulates success rates (--outcome success)")
    for name, rate in (("reference", reference_rate), ("candidate", candidate_rate)):
        if not 0 <= rate <= 1:
            raise QuarlError(f"bad {name} rate {rate:g}: expected a success rate in [0, 1]")
    if settings.design == "unpaired" or agreement is None:
        candidate_only, reference_only = candidate_rate * (1 - reference_rate), reference_rate * (1 - candidate_rate)
    else:
        gap, disagree = candidate_rate - reference_rate, 1 - agreement
        if not abs(gap) <= disagree <= 1 or disagree > min(
            candidate_rate + reference_rate, 2 - candidate_rate - reference_rate
        ):
            raise QuarlError(
                f"bad agreement {agreement:g}: rates {reference_rate:g} and {candidate_rate:g} agree on at most "
                f"{1 - abs(gap):g} and at least {max(0.0, 1 - min(candidate_rate + reference_rate, 2 - candidate_rate - reference_rate)):g} of trials"
            )
        candidate_only, reference_only = (disagree + gap) / 2, (disagree - gap) / 2
    if settings.test == "finite-horizon":  # exact: no simulation
        from quarl_bench.statistics.discordant import DiscordantPairTest

        found = DiscordantPairTest(settings.alpha, settings.max_trials, settings.design).operating(
            candidate_only, reference_only
        )
        return {
            "P(safe)": found.better,
            "P(unsafe)": found.worse,
            "P(undetermined)": 1 - found.better - found.worse,
            "mean pairs": found.mean_pairs,
            "sequences": 0.0,  # exact: none simulated
        }
    test = SequentialTest("finite-sample", settings.alpha, settings.bounds, bet=settings.test)
    draw = (
        unpaired(candidate_rate, reference_rate)
        if settings.design == "unpaired" or agreement is None
        else paired(candidate_only, reference_only)
    )
    simulated = simulate(draw, sequences, settings.max_trials, test, settings.epsilon, seed=0)
    return {
        "P(safe)": simulated.above,
        "P(unsafe)": simulated.below,
        "P(undetermined)": 1 - simulated.above - simulated.below,
        "mean pairs": simulated.mean_trials,
        "median pairs": simulated.median_trials,
        "sequences": float(sequences),
    }
