"""``python -m quarl_bench``: the same command line as the ``quarl-bench`` script."""

from quarl_bench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
