"""Which spec options a method applies: a spec's options by group (``grid``, ``recipe``), and the one check that a
method's config (its ``spec_flags``) takes them, asked where a method is named: the grid loader, the method command,
``certify --method``."""

from __future__ import annotations

from quarl_bench.errors import QuarlError
from quarl_bench.store.spec_kinds import SPEC_GRID, SPEC_RECIPE, spec_options
from quarl_bench.types import QuantSpec

EVERY_SPEC_OPTION = (SPEC_GRID, SPEC_RECIPE)


def options_set(spec: QuantSpec) -> dict[str, list[str]]:
    """:func:`~quarl_bench.store.spec_kinds.spec_options`, per-layer precisions counted in the recipe."""
    options = spec_options(spec)
    options[SPEC_RECIPE] += ["per-layer precisions"] if spec.layer_precisions else []
    return options


def check_spec_options(method: str, takes: tuple[str, ...], spec: QuantSpec) -> None:
    """:raises QuarlError: for a spec setting what ``method`` does not apply (``takes``: its config's
    ``spec_flags``)."""
    options = options_set(spec)
    refused = [option for group in options if group not in takes for option in options[group]]
    if refused:
        raise QuarlError(
            f"method {method!r} does not apply {', '.join(refused)} (its specs take "
            f"{' and '.join(f'{group} options' for group in takes) or 'a precision only'})"
        )
