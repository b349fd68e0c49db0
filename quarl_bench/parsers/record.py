"""``quarl-bench record``: the certified record of a zoo folder, and ``record diff OLD NEW``."""

from __future__ import annotations

from pathlib import Path

from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import add_executor, add_store


def add_record(commands: Subcommands) -> None:
    record = commands.add_parser(
        "record",
        help="certify every agent of a zoo folder on one precision ladder (resumable); record diff OLD NEW",
        description="Certify fp16, int8, int6, int5, int4 (round-to-nearest per tensor), int4 per channel and W8A8 "
        "for every agent of --folder at certify's defaults, list the agents that cannot run here with the reason, "
        "and write record.md, record.csv and record_verdicts.csv. Resumes from the store's verdicts. "
        "`quarl-bench record diff OLD NEW` compares two records (stores or record_verdicts.csv): the verdicts that "
        "changed with both sides' evidence, and the versions and CPU kinds; exit 1 when a confirmatory one changed. "
        "Example: quarl-bench record -f rl-trained-agents --algo dqn --plan",
    )
    record.set_defaults(handler=handler("record:record"))
    record.add_argument("action", nargs="*", metavar="diff OLD NEW", help="compare two records instead")
    record.add_argument(
        "-f", "--folder", default=None, help="rl-zoo3 log folder (algo/ENV_N/ENV.zip; default $QUARL_ZOO)"
    )
    record.add_argument("--algo", nargs="+", default=None, metavar="A", help="only these algorithms")
    record.add_argument("--env", nargs="+", default=None, metavar="ENV", help="only these env ids, as saved")
    record.add_argument("--plan", action="store_true", help="list the agents, the reasons and the time; run nothing")
    add_executor(record, "processes (or Ray tasks) certifying agents, families and scale sets side by side", "1")
    record.add_argument(
        "--perturb",
        default="",
        metavar="COND",
        help="also certify every agent under this condition, grid or named suite (zoo_configs/perturbations.yaml), "
        "α shared with the nominal record; an env that cannot play it is certified nominally only",
    )
    record.add_argument(
        "--budget", default=None, metavar="TIME", help="certify only the agents that fit, e.g. 30m or 2h (in order)"
    )
    record.add_argument(
        "--out", type=Path, default=Path("results/record"), help="where record.md/csv go (default results/record)"
    )
    add_store(record)
