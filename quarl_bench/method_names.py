"""The names of the registered methods, importable by anything (no quarl-bench import): the built-in ones and
the modules that register them (``METHOD_MODULES``), and every config type registered since under its ``method``
name (``methods/protocol.register`` writes here); it sits low in the house, since specs validate against it. Specs, jobs and grids validate against :func:`method_names`."""

from __future__ import annotations

REGISTERED: dict[str, type] = {}  # method name -> its config type (the first registered under that name)
# Method name -> the module that registers it (its handler, its job evaluator), imported when the method is first
# named or run (torch, rl-zoo3 and Ray stay unimported until then). The names a spec, a job and a grid accept are
# these and every method registered since: a new method is one module, imported before it is named, or a line here.
METHOD_MODULES = {
    "ptq": "quarl_bench.methods.ptq",
    "mixed": "quarl_bench.methods.ptq",  # a per-layer allocation (``quarl-bench mixed``), evaluated as PTQ
    "random": "quarl_bench.methods.random_policy",  # the uniform-random policy: the 0 of normalised scores
    "deploy": "quarl_bench.methods.deploy",
    "qat": "quarl_bench.methods.qat",
    "amp": "quarl_bench.methods.amp",
    "rollout": "quarl_bench.methods.rollout",
    "actorq": "quarl_bench.methods.actorq",
    "fidelity": "quarl_bench.methods.fidelity",
    "harden": "quarl_bench.methods.harden",
}


# Spec methods evaluated as PTQ of an existing agent: a grid's cells of these are grouped by agent (one work per agent
# and worker), every other method's cell is a run of its own (its config's ``from_cell``).
PTQ_METHODS = ("ptq", "mixed")


def method_names() -> tuple[str, ...]:
    """Every method name a spec, a job or a grid may carry: the built-in ones and those registered since."""
    return tuple(dict.fromkeys([*METHOD_MODULES, *REGISTERED]))
