"""Report generation time on a real store (default ``results/methods.sqlite``, the methods sweep: 2,293 rows):
``quarl-bench report --html`` (tables, figures and the one-page ``report.html``), as the command runs it.

Run: python benchmarks/report_speed.py [--store results/methods.sqlite] [--out /tmp/report_speed]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from quarl_bench import ResultStore, write_report
from quarl_bench.cli import main as main_cli
from quarl_bench.config import config_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=Path("results/methods.sqlite"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/report_speed"))
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"), help="--quick: its agent")
    parser.add_argument("--formats", nargs="+", default=["svg", "png"], help="figure formats, as report --formats")
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:  # a store of one small run
        args.store, args.out = Path(tempfile.mkdtemp()) / "quick.sqlite", Path(tempfile.mkdtemp())
        run = ["run", "--algo", "dqn", "--env", "CartPole-v1", "--bits", "8", "-n", "4", "--folder", args.zoo]
        main_cli([*run, "--store", str(args.store)])
    with ResultStore(args.store) as store:
        rows = len(store.to_dataframe())
        if rows < 1000 and not args.quick:
            raise SystemExit(f"{args.store} has {rows} rows: expected a store of at least 1000 (a sweep's)")
        start = time.perf_counter()
        report = write_report(store, args.out, config_dir() / "paper", formats=tuple(args.formats), html=True)
        seconds = time.perf_counter() - start
    figures = sum(1 for item in report.items if not hasattr(item, "frame"))
    assert report.page is not None
    print(
        f"{rows} rows: {len(report.items)} report objects ({figures} figures), {len(report.written)} files, "
        f"report.html {report.page.stat().st_size / 1e6:.1f} MB"
    )
    print(f"report --html: {seconds:.1f} s for {rows} rows")


if __name__ == "__main__":
    main()
