"""Commands that read the store: report, results."""

from __future__ import annotations

from pathlib import Path

from quarl_bench.certify.config import CertifyConfig
from quarl_bench.config import config_dir
from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import add_env, add_store
from quarl_bench.parsers.config_flags import config_flag


def add_report(commands: Subcommands) -> None:
    report = commands.add_parser("report", help="write the paper's tables and figures from the store")
    report.set_defaults(handler=handler("read:report"))
    add_store(report)
    report.add_argument("--out", type=Path, default=Path("results"), help="output folder (default %(default)s)")
    report.add_argument(
        "--paper",
        type=Path,
        default=config_dir() / "paper",
        help="folder of the papers' published numbers (default zoo_configs/paper)",
    )
    config_flag(
        report,
        CertifyConfig,
        "tolerance",
        help="minimum safe bit width: % of the fp32 reward the CI lower bound may lose",
    )
    report.add_argument(
        "--html", action="store_true", help="also write report.html: one self-contained page, figures embedded"
    )
    report.add_argument(
        "--formats",
        nargs="+",
        choices=("svg", "png", "pdf"),
        default=None,
        help="figure files to write (default svg; svg png with --all-files; report.html embeds the svg)",
    )
    report.add_argument(
        "--all-files",
        action="store_true",
        help="every file: each table also as Markdown (and LaTeX), empty tables, PNG figures, and a reward table "
        "per certification batch variant (default: the files a reader opens)",
    )


def add_results(commands: Subcommands) -> None:
    results = commands.add_parser("results", help="print the results store; export it")
    results.set_defaults(handler=handler("read:results"))
    add_store(results)
    results.add_argument("--algo", default=None)
    add_env(results, help="only this env's rows (id or alias)")
    results.add_argument("--csv", type=Path, default=None, help="write the rows to this CSV file")
    results.add_argument("--parquet", type=Path, default=None, help="write the rows to this Parquet file")
