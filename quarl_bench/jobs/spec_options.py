"""Which spec options a method applies: a spec's options by group (``grid``, ``recipe``), and the one check that a
method's config (its ``spec_flags``) takes them, asked where a method is named: the grid loader, the method command,
``certify --method``."""

from __future__ import annotations

from quarl_bench.errors import QuarlError
from quarl_bench.types import QuantSpec

SPEC_GRID, SPEC_RECIPE = "grid", "recipe"  # the spec option groups a method may apply beyond the precision
EVERY_SPEC_OPTION = (SPEC_GRID, SPEC_RECIPE)


def spec_options(spec: QuantSpec) -> dict[str, list[str]]:
    """What a spec sets beyond its precision, by option group (``grid``, ``recipe``), as a user wrote it."""
    grid = [spec.granularity] if spec.granularity != "auto" else []
    grid += [name for name in ("symmetric", "quantize_bias") if getattr(spec, name)]
    grid += [f"layers {spec.layers}"] if spec.layers != "paper" else []
    recipe = [spec.recipe_label()] if spec.recipe_label() else []
    recipe += ["per-layer precisions"] if spec.layer_precisions else []
    return {SPEC_GRID: grid, SPEC_RECIPE: recipe}


def check_spec_options(method: str, takes: tuple[str, ...], spec: QuantSpec) -> None:
    """:raises QuarlError: for a spec setting what ``method`` does not apply (``takes``: its config's
    ``spec_flags``)."""
    options = spec_options(spec)
    refused = [option for group in options if group not in takes for option in options[group]]
    if refused:
        raise QuarlError(
            f"method {method!r} does not apply {', '.join(refused)} (its specs take "
            f"{' and '.join(f'{group} options' for group in takes) or 'a precision only'})"
        )
