"""``quarl-bench trials``: parse, call ``api/trials.py``, print the verdict line (or JSON) after each answer."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from quarl_bench.commands.common import console
from quarl_bench.errors import QuarlError

SETTING_FLAGS = (
    *("reference", "candidate", "design", "outcome", "bounds", "epsilon", "confidence", "max_trials", "test"),
)


def trials(args: argparse.Namespace) -> int:
    """Exit 0 with a verdict or a campaign going on; exit 2 for bad input (nothing added to a campaign)."""
    from quarl_bench.api.trials import Campaign, checked_trial, decide, read_csv

    action = args.action
    if action == "plan":
        return _plan(args)
    if not args.args:
        raise QuarlError(f"bad trials {action}: expected a {'CSV' if action == 'decide' else 'campaign'} file")
    path = Path(args.args[0])
    if action == "decide":
        _expect(args, 1)
        settings = _settings(args)
        return _show(decide(settings, read_csv(path, settings)), args.json)
    if action == "start":
        _expect(args, 1)
        campaign = Campaign.start(path, _settings(args))
        return _show(decide(campaign.settings, campaign.trials), args.json)
    _no_settings(args, action)  # a running campaign's settings are its own: never given again
    campaign = Campaign.open(path)
    if action == "status":
        _expect(args, 1)
        return _show(decide(campaign.settings, campaign.trials), args.json)
    if action == "add":
        if len(args.args) not in (3, 4):
            raise QuarlError("bad trials add: expected trials add CAMPAIGN POLICY OUTCOME [TRIAL]")
        trial = checked_trial(campaign.settings, *args.args[1:])
        return _show(campaign.add(trial), args.json)
    _expect(args, 1)
    for number, line in enumerate(sys.stdin, start=1):  # live: one trial a line, answered after each
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) not in (2, 3):
            raise QuarlError(f"bad line {number} {line.strip()!r}: expected POLICY OUTCOME [TRIAL]")
        decision = campaign.add(checked_trial(campaign.settings, *fields))
        _show(decision, args.json)
        sys.stdout.flush()
        if not decision.going_on:
            break
    return 0


def _settings(args: argparse.Namespace) -> Any:
    from quarl_bench.api.trials import TrialSettings

    given = {name: getattr(args, name) for name in SETTING_FLAGS if getattr(args, name) is not None}
    if "bounds" in given:
        given["bounds"] = tuple(given["bounds"])
    if "reference" not in given or "candidate" not in given:
        raise QuarlError("bad trials: expected --reference LABEL and --candidate LABEL (the two policies' names)")
    return TrialSettings(**given)


def _no_settings(args: argparse.Namespace, action: str) -> None:
    given = [name for name in SETTING_FLAGS if getattr(args, name) is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise QuarlError(
            f"bad {flag} for trials {action}: a campaign keeps the settings it was started with (start another "
            "campaign to ask another question)"
        )


def _expect(args: argparse.Namespace, count: int) -> None:
    if len(args.args) != count:
        raise QuarlError(f"bad trials {args.action}: expected one file, got {' '.join(args.args)}")


def _show(decision: Any, as_json: bool) -> int:
    if as_json:
        print(json.dumps(decision.as_json()))
    else:
        console.print(decision.line())
    return 0


def _plan(args: argparse.Namespace) -> int:
    from quarl_bench.api.trials import TrialSettings
    from quarl_bench.api.trials_plan import expected_trials

    source = None
    if args.from_store is not None:
        from quarl_bench.api.trials_plan import rates_from_store

        if args.rates is not None or args.agreement is not None:
            raise QuarlError("bad trials plan: --from takes the rates and agreement from a verdict (no --rates)")
        source = rates_from_store(Path(args.from_store), args.key, args.candidate)
        args.rates, args.agreement = [source.reference_rate, source.candidate_rate], source.agreement
    if args.rates is None:
        raise QuarlError(
            "bad trials plan: expected --rates REF CAND (the success rates you expect) or --from STORE (a sim "
            "certification's success verdict)"
        )
    given = {name: getattr(args, name) for name in SETTING_FLAGS if getattr(args, name) is not None}
    given.setdefault("reference", "reference")
    given.setdefault("candidate", "candidate")
    if "bounds" in given:
        given["bounds"] = tuple(given["bounds"])
    settings = TrialSettings(**given)
    plan = expected_trials(settings, args.rates[0], args.rates[1], args.agreement)
    if args.json:
        found = {"settings": settings.identity(), "rates": list(args.rates), "agreement": args.agreement, "plan": plan}
        print(json.dumps(found | ({"from": source.as_json()} if source else {})))
        return 0
    if source is not None:
        console.print(source.line())
    exact = settings.test == "finite-horizon"
    how = (
        "exact, from the test's own boundaries"
        if exact
        else f"median {plan['median pairs']:.0f}, from {int(plan['sequences'])} simulated campaigns of the test itself"
    )
    console.print(
        f"{settings.design}, {settings.test} test, ε {settings.epsilon:g}, confidence {settings.confidence:g}, cap "
        f"{settings.max_trials} pairs, rates {args.rates[0]:g} (reference) and {args.rates[1]:g} (candidate)"
        + (f", agreement {args.agreement:g}" if args.agreement is not None else "")
        + f": P(safe) {plan['P(safe)']:.3f}, P(unsafe) {plan['P(unsafe)']:.3f}, "
        f"{plan['mean pairs']:.0f} pairs on average ({how})"
    )
    return 0
