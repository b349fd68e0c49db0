"""Trials recorded outside quarl-bench (a robot's), decided as they come: ``quarl-bench trials``.

A robot engineer runs a reference policy and a candidate (an int8 copy), records each trial's outcome (a success, a
progress in [0, 1], or a return in declared bounds) and wants to stop as soon as the answer is known. The decision is
certify's own: the finite-sample betting test (:class:`~quarl_bench.statistics.certification.SequentialTest`) on the
differences candidate - reference, read after every pair, "safe" once the candidate is certified not worse than the
reference by more than ε, "unsafe" once it is certified worse; the same :class:`~quarl_bench.certify.result.Verdict`,
console line and ``--json`` as ``certify``.

- **paired**: both policies play each trial id (the same initial condition): pairs in the order each trial id was
  completed, as recorded;
- **unpaired**: trials cannot share initial conditions: the i-th trial of each policy, in the order recorded.

A **campaign** file is the record: JSON lines, the first its settings (design, outcome, bounds, ε, α, cap, the two
labels), then one line per trial. It resumes after a crash (a line cut short by one is not a trial: it was never
acknowledged, and is dropped), refuses a trial added twice, and refuses other settings once it exists, so the answer
cannot be asked again with another ε after the data are seen.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from quarl_bench.errors import QuarlError

DESIGNS = ("paired", "unpaired")
OUTCOMES = ("success", "progress", "return")
# plug-in: certify's betting test; hedged: the same with a hedged bet (statistics/betting.py: fewer pairs where
# the mean gap is small beside the spread); both anytime-valid, any outcome and margin. finite-horizon: the
# discordant-pair test (success, ε = 0: is the candidate's rate above or below the reference's?), exact over the cap
TESTS = ("auto", "plug-in", "hedged", "finite-horizon")
CAMPAIGN_VERSION = 1


@dataclass(frozen=True)
class TrialSettings:
    """How a campaign (or a recorded CSV) is decided.

    :param reference: the label of the policy the candidate is compared with (fp32, the current release).
    :param candidate: the label of the policy on trial (the int8 copy).
    :param design: ``paired`` (trial ids shared) or ``unpaired`` (independent trials).
    :param outcome: ``success`` (0 or 1), ``progress`` (in [0, 1]) or ``return`` (in ``bounds``).
    :param bounds: every outcome lies in [LO, HI]: (0, 1) for a success or a progress; declared for a return.
    :param epsilon: how far the candidate's mean may fall below the reference's and still be safe.
    :param confidence: 1 - α: a wrong "safe" (or a wrong "unsafe") has probability ≤ α.
    :param max_trials: pairs after which a campaign still undecided is undetermined.
    :param test: ``plug-in`` (certify's betting test), ``hedged`` (its hedged bet), ``finite-horizon`` (success
        rates at ε = 0: the discordant pairs' test, its α spent over ``max_trials``) or ``auto`` (finite-horizon where
        it applies, else hedged); stored resolved (a campaign started before this setting is ``plug-in``).
    """

    reference: str
    candidate: str
    design: str = "paired"
    outcome: str = "success"
    bounds: tuple[float, float] = (0.0, 1.0)
    epsilon: float = 0.05
    confidence: float = 0.95
    max_trials: int = 500
    test: str = "auto"

    def __post_init__(self) -> None:
        if not self.reference or not self.candidate or self.reference == self.candidate:
            raise QuarlError(
                f"bad policy labels {self.reference!r} and {self.candidate!r}: expected two different names "
                "(--reference and --candidate)"
            )
        if self.design not in DESIGNS:
            raise QuarlError(f"bad design {self.design!r}: expected one of {', '.join(DESIGNS)}")
        if self.outcome not in OUTCOMES:
            raise QuarlError(f"bad outcome {self.outcome!r}: expected one of {', '.join(OUTCOMES)}")
        low, high = (float(b) for b in self.bounds)
        if self.outcome != "return" and (low, high) != (0.0, 1.0):
            raise QuarlError(f"bad bounds [{low:g}, {high:g}] for a {self.outcome}: it lies in [0, 1]")
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise QuarlError(f"bad bounds [{low:g}, {high:g}]: expected finite LO < HI")
        object.__setattr__(self, "bounds", (low, high))
        if not 0 <= self.epsilon < high - low:
            raise QuarlError(f"bad epsilon {self.epsilon:g}: expected a margin in [0, {high - low:g})")
        if not 0.5 < self.confidence < 1:
            raise QuarlError(f"bad confidence {self.confidence:g}: expected a level in (0.5, 1), e.g. 0.95")
        if self.max_trials < 1:
            raise QuarlError(f"bad max trials {self.max_trials}: expected an integer >= 1")
        if self.test not in TESTS:
            raise QuarlError(f"bad test {self.test!r}: expected one of {', '.join(TESTS)}")
        rates_at_zero = self.outcome == "success" and self.epsilon == 0
        if self.test == "finite-horizon" and not rates_at_zero:
            raise QuarlError(
                f"bad test 'finite-horizon' for a {self.outcome} at ε {self.epsilon:g}: it compares success rates at "
                "ε = 0 (--outcome success --epsilon 0); --test hedged or plug-in take any outcome and margin"
            )
        if self.test == "auto":
            object.__setattr__(self, "test", "finite-horizon" if rates_at_zero else "hedged")

    @property
    def alpha(self) -> float:
        return 1 - self.confidence

    def identity(self) -> dict[str, Any]:
        return asdict(self) | {"bounds": list(self.bounds)}


@dataclass(frozen=True)
class Trial:
    """One recorded trial: which policy played it, its outcome, and its id (a paired design's shared trial)."""

    policy: str
    outcome: float
    trial: str = ""


def checked_trial(settings: TrialSettings, policy: str, outcome: str | float, trial: str = "") -> Trial:
    """A trial as recorded, checked against the settings.

    :raises QuarlError: in one line, for an unknown policy label, an outcome that is no number or lies outside its
        bounds (a success that is not 0 or 1), or a paired trial with no id.
    """
    if policy not in (settings.reference, settings.candidate):
        raise QuarlError(
            f"bad policy {policy!r}: expected {settings.reference!r} (reference) or {settings.candidate!r} (candidate)"
        )
    try:
        value = float(outcome)
    except (TypeError, ValueError):
        value = math.nan
    low, high = settings.bounds
    if not math.isfinite(value) or not low <= value <= high:
        raise QuarlError(f"bad outcome {outcome!r} for {policy}: expected a {settings.outcome} in [{low:g}, {high:g}]")
    if settings.outcome == "success" and value not in (0.0, 1.0):
        raise QuarlError(f"bad outcome {outcome!r} for {policy}: a success is 0 or 1")
    if settings.design == "paired" and not str(trial).strip():
        raise QuarlError(
            f"bad trial for {policy}: a paired design needs each trial's id (the initial condition shared)"
        )
    return Trial(policy, value, str(trial).strip())


@dataclass(frozen=True)
class Pairs:
    """The recorded trials as pairs, in the order fixed by the record (each pair complete when its second trial
    was recorded), and what is still open."""

    candidate: np.ndarray
    reference: np.ndarray
    waiting: str = ""  # the policy a pair waits for ('' when none is open)


def pairs_of(settings: TrialSettings, trials: Iterable[Trial]) -> Pairs:
    """Pair the trials: by trial id (paired), or the i-th of each policy (unpaired), in recorded order.

    :raises QuarlError: for a trial id one policy played twice.
    """
    candidate: list[float] = []
    reference: list[float] = []
    if settings.design == "paired":
        open_trials: dict[str, dict[str, float]] = {}
        for trial in trials:
            played = open_trials.setdefault(trial.trial, {})
            if trial.policy in played or played.get("done"):
                raise QuarlError(f"bad trial {trial.trial!r}: {trial.policy} played it already (a trial is added once)")
            played[trial.policy] = trial.outcome
            if settings.reference in played and settings.candidate in played:
                candidate.append(played[settings.candidate])
                reference.append(played[settings.reference])
                open_trials[trial.trial] = {"done": 1.0}
        waiting = next(
            (
                settings.candidate if settings.reference in played else settings.reference
                for played in open_trials.values()
                if "done" not in played
            ),
            "",
        )
        return Pairs(np.array(candidate), np.array(reference), waiting)
    arms: dict[str, list[float]] = {settings.reference: reference, settings.candidate: candidate}
    for trial in trials:
        arms[trial.policy].append(trial.outcome)
    n = min(len(candidate), len(reference))
    waiting = (
        ""
        if len(candidate) == len(reference)
        else (settings.candidate if len(reference) > len(candidate) else settings.reference)
    )
    return Pairs(np.array(candidate[:n]), np.array(reference[:n]), waiting)


@dataclass(frozen=True)
class Decision:
    """Where a campaign stands: its verdict (``undetermined`` while it goes on or at the cap), whether to go on,
    and which policy to run next."""

    verdict: Any  # certify.result.Verdict
    going_on: bool
    next_policy: str
    trials: int

    def as_json(self) -> dict[str, Any]:
        return {
            "status": "continue" if self.going_on else "decided",
            "next": self.next_policy if self.going_on else None,
            "trials": self.trials,
            "verdict": self.verdict.as_json(),
        }

    def line(self) -> str:
        """What the console says after each trial: the verdict line, or go on and which policy plays next."""
        from quarl_bench.report.console import verdict_line

        text = verdict_line(self.verdict)
        if self.going_on:
            return f"continue: run {self.next_policy} next ({self.trials} trials recorded)\n{text}"
        return text


def decide(settings: TrialSettings, trials: list[Trial]) -> Decision:
    """The campaign's answer after ``trials``: its test read after every pair, stopped at its first decision (later
    pairs are not read: the test's rejection is final), undetermined at the cap."""
    from quarl_bench.certify.outcome import arm_outcomes
    from quarl_bench.certify.result import Verdict

    pairs = pairs_of(settings, trials)
    d = (pairs.candidate - pairs.reference)[: settings.max_trials]
    read, decided, shown = _read(settings, d)
    low, high = settings.bounds
    evidence = {
        "design": settings.design,
        "outcome": settings.outcome,
        "perturbation": "",
        "method": "trials",
        "reference": settings.reference,
        "candidate": settings.candidate,
        "test": settings.test,
        "guarantee": "finite-sample, exact over the cap" if settings.test == "finite-horizon" else "finite-sample",
        "bounds": [low, high],
        "bounds_source": "declared" if settings.outcome == "return" else f"a {settings.outcome} lies in [0, 1]",
        "alpha_test": settings.alpha,
        "delta_low": settings.epsilon,
        "delta_high": settings.epsilon,
        "families": 1,
        "max_trials": settings.max_trials,
    } | shown.evidence
    if len(read):
        evidence |= arm_outcomes(settings.outcome, pairs.candidate[: len(read)], pairs.reference[: len(read)])
    verdict = Verdict(
        settings.candidate,
        settings.candidate,
        decided or "undetermined",
        int(len(read)),
        float(read.mean()) if len(read) else math.nan,
        shown.lower,
        shown.upper,
        settings.epsilon,
        settings.alpha,
        evidence=evidence,
    )
    going_on = decided is None and len(d) < settings.max_trials
    next_policy = pairs.waiting or settings.reference
    return Decision(verdict, going_on, next_policy, len(trials))


@dataclass(frozen=True)
class _Shown:
    """What a verdict shows beside its answer: the anytime test's interval, or the finite-horizon walk."""

    lower: float = math.nan
    upper: float = math.nan
    evidence: dict[str, Any] = field(default_factory=dict)


def _read(settings: TrialSettings, d: np.ndarray) -> tuple[np.ndarray, str | None, _Shown]:
    """The pairs read (up to the first decision), the decision (safe, unsafe or None) and what the verdict shows."""
    if not len(d):
        return d, None, _Shown()
    if settings.test == "finite-horizon":
        from quarl_bench.statistics.discordant import DiscordantPairTest

        test = DiscordantPairTest(settings.alpha, settings.max_trials, settings.design)
        codes = test.decide_looks(d, np.arange(len(d)))
    else:
        from quarl_bench.statistics.certification import SequentialTest

        betting = SequentialTest("finite-sample", settings.alpha, settings.bounds, bet=settings.test)
        codes = betting.decide_looks(d, settings.epsilon, np.arange(len(d)))
    crossed = np.flatnonzero(codes)
    used = int(crossed[0]) + 1 if len(crossed) else len(d)
    decided = {1: "safe", -1: "unsafe"}[int(codes[crossed[0]])] if len(crossed) else None
    read = d[:used]
    if settings.test != "finite-horizon":
        interval = betting.interval(read)
        return read, decided, _Shown(float(interval.lower), float(interval.upper))
    discordant = int(np.count_nonzero(read))
    walk = int(read.sum())
    boundary = test.boundary(discordant, final=used >= settings.max_trials)
    return read, decided, _Shown(evidence={"walk": walk, "discordant_pairs": discordant, "boundary": boundary})


def read_csv(path: Path, settings: TrialSettings) -> list[Trial]:
    """Trials recorded in a CSV with columns ``policy``, ``outcome`` and (paired) ``trial``, in recorded order.

    :raises QuarlError: for a missing file or column, or any bad line (its line number named).
    """
    if not path.is_file():
        raise QuarlError(f"bad trials file {str(path)!r}: expected a CSV with columns policy, outcome[, trial]")
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        needed = {"policy", "outcome"} | ({"trial"} if settings.design == "paired" else set())
        missing = sorted(needed - set(reader.fieldnames or ()))
        if missing:
            raise QuarlError(
                f"bad trials file {str(path)!r}: no column {', '.join(missing)} (expected policy, outcome, trial)"
            )
        trials = []
        for number, row in enumerate(reader, start=2):
            try:
                trials.append(checked_trial(settings, row["policy"], row["outcome"], row.get("trial") or ""))
            except QuarlError as error:
                raise QuarlError(f"{path}:{number}: {error}") from None
    return trials


@dataclass
class Campaign:
    """A campaign file: its settings and the trials recorded so far (see the module docstring)."""

    path: Path
    settings: TrialSettings
    trials: list[Trial] = field(default_factory=list)

    @classmethod
    def start(cls, path: Path, settings: TrialSettings) -> Campaign:
        """A new campaign at ``path``, or the one there when it was started with the same settings.

        :raises QuarlError: for an existing campaign started with other settings, naming the first that differs.
        """
        if path.exists():
            found = cls.open(path)
            if found.settings != settings:
                old, new = found.settings.identity(), settings.identity()
                name = next(n for n in old if old[n] != new[n])
                raise QuarlError(
                    f"bad {name.replace('_', ' ')} {new[name]!r}: campaign {str(path)!r} was started with "
                    f"{old[name]!r}; its settings are fixed before its trials (start another campaign)"
                )
            return found
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"campaign": settings.identity(), "version": CAMPAIGN_VERSION}
        temporary = path.with_name(path.name + ".new")
        temporary.write_text(json.dumps(header) + "\n")
        os.replace(temporary, path)  # whole or not at all
        return cls(path, settings)

    @classmethod
    def open(cls, path: Path) -> Campaign:
        """The campaign at ``path``, resumed (a last line a crash cut short is dropped).

        :raises QuarlError: for a file that is no campaign.
        """
        if not path.is_file():
            raise QuarlError(f"bad campaign {str(path)!r}: no such file; start it with quarl-bench trials start")
        text = path.read_text()
        lines = text.split("\n")
        complete = lines[:-1]  # a line is recorded once its newline is: a cut-off tail was never acknowledged
        try:
            header = json.loads(complete[0])
            started = {"test": "plug-in"} | header["campaign"]  # started before the setting: certify's test
            settings = TrialSettings(**(started | {"bounds": tuple(header["campaign"]["bounds"])}))
        except (IndexError, KeyError, TypeError, json.JSONDecodeError):
            raise QuarlError(f"bad campaign {str(path)!r}: expected a file quarl-bench trials start wrote") from None
        trials = [Trial(**{k: v for k, v in json.loads(line).items() if k != "at"}) for line in complete[1:] if line]
        if lines[-1]:  # drop the cut-off tail now, so the next trial starts a line of its own
            with open(path, "w") as handle:
                handle.write("\n".join(complete) + "\n")
        return cls(path, settings, trials)

    def add(self, trial: Trial) -> Decision:
        """Record ``trial`` (appended and flushed to disk before it counts) and say where the campaign stands.

        :raises QuarlError: for a campaign already decided, or a trial added twice; nothing is written then.
        """
        before = decide(self.settings, self.trials)
        if not before.going_on:
            raise QuarlError(
                f"campaign {str(self.path)!r} is decided ({before.verdict.verdict} after {before.verdict.episodes} "
                "pairs): nothing added"
            )
        pairs_of(self.settings, [*self.trials, trial])  # a trial added twice: refused before it is written
        line = json.dumps(asdict(trial) | {"at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        with open(self.path, "a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.trials.append(trial)
        return decide(self.settings, self.trials)
