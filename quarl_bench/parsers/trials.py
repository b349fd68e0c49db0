"""``quarl-bench trials``: outcomes recorded outside quarl-bench (a robot's trials), decided as they come."""

from __future__ import annotations

from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import positive_int

ACTIONS = ("decide", "start", "add", "live", "status", "plan")


def add_trials(commands: Subcommands) -> None:
    trials = commands.add_parser(
        "trials",
        help="decide two policies' recorded trials (a CSV, or a campaign one trial at a time)",
        description="Certify's sequential test on trials recorded elsewhere (a robot's): is the candidate not worse "
        "than the reference by more than --epsilon? `trials decide FILE.csv` (columns policy, outcome[, trial]); "
        "`trials start CAMPAIGN` (the settings, fixed from then on), `trials add CAMPAIGN POLICY OUTCOME [TRIAL]`, "
        "`trials live CAMPAIGN` (lines 'POLICY OUTCOME [TRIAL]' on stdin), `trials status CAMPAIGN`: after each "
        "trial, continue (and which policy runs next) or the verdict; `trials plan --rates REF CAND`: the trials to "
        "expect. Example: quarl-bench trials decide runs.csv --reference fp32 --candidate int8 --epsilon 0.1",
    )
    trials.set_defaults(handler=handler("trials:trials"))
    trials.add_argument("action", choices=ACTIONS, help="what to do")
    trials.add_argument("args", nargs="*", metavar="ARG", help="the CSV or campaign file, then a trial's fields")
    trials.add_argument("--reference", default=None, metavar="LABEL", help="the reference policy's label (e.g. fp32)")
    trials.add_argument("--candidate", default=None, metavar="LABEL", help="the candidate's label (e.g. int8)")
    trials.add_argument(
        "--design", default=None, choices=("paired", "unpaired"), help="paired: trial ids shared (default)"
    )
    trials.add_argument(
        "--outcome",
        default=None,
        choices=("success", "progress", "return"),
        help="what a trial records (default success)",
    )
    trials.add_argument(
        "--bounds", nargs=2, type=float, default=None, metavar=("LO", "HI"), help="a return's bounds (every trial's)"
    )
    trials.add_argument("--epsilon", type=float, default=None, help="the margin the candidate may fall (default 0.05)")
    trials.add_argument("--confidence", type=float, default=None, help="1 - α (default 0.95)")
    trials.add_argument("--max-trials", type=positive_int, default=None, help="pairs before undetermined (default 500)")
    trials.add_argument(
        "--test",
        default=None,
        choices=("auto", "plug-in", "hedged", "finite-horizon"),
        help="finite-horizon: success rates at --epsilon 0, α spent exactly over --max-trials; hedged: anytime betting "
        "with a hedged bet (fewer pairs for small gaps); plug-in: certify's own bet; auto (default): finite-horizon "
        "where it applies, else hedged",
    )
    trials.add_argument(
        "--rates", nargs=2, type=float, default=None, metavar=("REF", "CAND"), help="plan: the success rates expected"
    )
    trials.add_argument("--agreement", type=float, default=None, help="plan, paired: the share of trials alike")
    trials.add_argument(
        "--from",
        dest="from_store",
        default=None,
        metavar="STORE",
        help="plan: the rates and agreement of a sim certification's success verdict in STORE (certify --outcome "
        "success; the one of --candidate's precision, or --key)",
    )
    trials.add_argument("--key", default=None, help="plan --from: the verdict's key (or its start)")
    trials.add_argument("--json", action="store_true", help="one JSON line per answer, as certify --json")
