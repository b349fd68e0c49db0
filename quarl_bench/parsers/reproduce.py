"""``quarl-bench reproduce``: every paper artifact the available agents allow, planned, run and reported."""

from __future__ import annotations

from pathlib import Path

from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import add_sources, add_store

ARTIFACTS = ("table2", "figure7", "qat", "table4", "table5", "actorq")  # api/reproduce.ARTIFACT_NAMES, in run order


def add_reproduce(commands: Subcommands) -> None:
    reproduce = commands.add_parser(
        "reproduce",
        help="regenerate the papers' tables and figures: plan, run (resumable), report",
        description="Plan, run and report every paper artifact the available agents allow (QuaRL Table 2, figure 7, "
        "QAT, Table 4, Table 5, ActorQ Table 2): each published cell with its status and paired E% CI, in "
        "--out's report.html and paper pages. Runs resume from the store. Examples: quarl-bench reproduce --plan "
        "-f rl-trained-agents; quarl-bench reproduce --budget 2h -f rl-trained-agents; quarl-bench reproduce "
        "--quick (minutes). The certified record of a whole zoo is quarl-bench record.",
    )
    reproduce.set_defaults(handler=handler("reproduce:reproduce"))
    reproduce.add_argument(
        "--plan", action="store_true", help="print every artifact's cells, agents, gaps and estimated time; run nothing"
    )
    reproduce.add_argument(
        "--budget", default=None, metavar="TIME", help="run only the artifacts that fit, e.g. 30m or 2h (in order)"
    )
    reproduce.add_argument(
        "--quick", action="store_true", help="a smoke run of every artifact's path at tiny sizes (minutes)"
    )
    reproduce.add_argument(
        "--only", nargs="+", choices=ARTIFACTS, default=(), metavar="A", help=f"only: {' '.join(ARTIFACTS)}"
    )
    add_sources(reproduce)
    reproduce.add_argument("--hub", action="store_true", help="also try the Hugging Face hub for missing agents")
    add_store(reproduce)
    reproduce.add_argument(
        "--out", type=Path, default=Path("results/reproduction"), help="report folder (default results/reproduction)"
    )
