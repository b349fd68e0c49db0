"""One module per family of deployment backends, each registering its backends with
:func:`quarl_bench.registry.register_backend` (``registry.BACKENDS`` lists the built-in families first)."""
