"""The plan before a campaign's first trial (``quarl-bench trials plan``): for the success rates the user expects (a
sim certification's, where there is one), the chance of each verdict by the cap and the pairs to expect, from the
campaign's own test (exact for the finite-horizon one, simulated on the test itself for the betting ones)."""

from __future__ import annotations

from quarl_bench.api.trials import TrialSettings
from quarl_bench.errors import QuarlError


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
