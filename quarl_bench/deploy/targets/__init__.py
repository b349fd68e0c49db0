"""One module per family of deployment backends, each registering its backends with
:func:`quarl_bench.backend_registry.register_backend`. ``ORDER`` is the order ``--backend`` lists the built-in
families in; a new module needs no line here (it comes after them)."""

ORDER = ("torch", "onnxruntime", "torchao", "litert", "executorch", "c")


def position(module: str) -> tuple[int, str]:
    return (ORDER.index(module) if module in ORDER else len(ORDER), module)
