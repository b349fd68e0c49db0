"""Report generation time on a real store (default ``results/methods.sqlite``, the methods sweep: 2,293 rows): the
report files (tables and figures) and the one-page ``report.html`` built from them, timed apart, one run.

Run: python benchmarks/report_speed.py [--store results/methods.sqlite] [--out /tmp/report_speed]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from quarl_bench.config import config_dir
from quarl_bench.report.html import write_html_report
from quarl_bench.report.writer import write_report
from quarl_bench.store import ResultStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=Path("results/methods.sqlite"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/report_speed"))
    parser.add_argument("--formats", nargs="+", default=["svg", "png"], help="figure formats, as report --formats")
    args = parser.parse_args()
    with ResultStore(args.store) as store:
        rows = len(store.to_dataframe())
        if rows < 1000:
            raise SystemExit(f"{args.store} has {rows} rows: expected a store of at least 1000 (a sweep's)")
        start = time.perf_counter()
        write_report(store, args.out, config_dir() / "paper", formats=tuple(args.formats))
        files = time.perf_counter() - start
        start = time.perf_counter()
        page = write_html_report(store, args.out)
        html = time.perf_counter() - start
    print(f"{rows} rows: report files {files:.1f} s, report.html {html:.1f} s ({page.stat().st_size / 1e6:.1f} MB)")
    print(f"report --html: {files + html:.1f} s for {rows} rows")


if __name__ == "__main__":
    main()
