"""PTQ rounding algorithms, one module each, registered with :func:`quarl_bench.registry.register_rounding`."""
