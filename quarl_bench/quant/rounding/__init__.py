"""PTQ rounding algorithms, one module each, registered with :func:`quarl_bench.rounding.register_rounding`."""
