"""Per-layer sensitivity and a mixed-precision allocation search over an agent's acting layers.

Sensitivity: one acting layer at a time at each precision, every other layer fp32. The search is greedy: start
from the widest candidate for every layer (fp32 if even that misses the tolerance), then, least sensitive layer
first, lower each layer one candidate at a time while the evaluated reward stays within tolerance of fp32 (mean
over the search seeds' episodes); the allocation found is then verified on fresh seeds by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from quarl_bench.precision import precision_bits
from quarl_bench.types import QuantSpec


def one_layer_spec(n_layers: int, layer: int, precision: str) -> QuantSpec:
    """Layer ``layer`` at ``precision``, every other acting layer fp32."""
    return QuantSpec(precision, layer_precisions=tuple(precision if i == layer else "fp32" for i in range(n_layers)))


def sensitivity_specs(n_layers: int, precisions: Sequence[str]) -> list[QuantSpec]:
    """Every acting layer alone at every precision (layer-major)."""
    return [one_layer_spec(n_layers, layer, p) for layer in range(n_layers) for p in precisions]


def rank_layers(errors: dict[tuple[int, str], float], n_layers: int) -> list[int]:
    """Layers from least to most sensitive: by E% at the narrowest precision measured, then by the sum over all
    precisions (a NaN E% counts as the worst)."""

    def worst(value: float) -> float:
        return float("inf") if value != value else value

    precisions = sorted({p for _, p in errors}, key=precision_bits)
    narrowest = precisions[0]
    return sorted(
        range(n_layers),
        key=lambda i: (
            worst(errors.get((i, narrowest), float("nan"))),
            sum(worst(errors.get((i, p), float("nan"))) for p in precisions),
        ),
    )


def greedy_allocation(
    order: Sequence[int], ladder: Sequence[str], acceptable: Callable[[tuple[str, ...]], bool], n_layers: int
) -> tuple[tuple[str, ...], list[tuple[tuple[str, ...], bool]]]:
    """The allocation found and every allocation tried with its verdict.

    :param order: layers, least sensitive first.
    :param ladder: candidate precisions, widest first (e.g. int8, int6, int4, int2).
    :param acceptable: whether an allocation keeps the reward within tolerance (one evaluation per call).
    """
    tried: list[tuple[tuple[str, ...], bool]] = []

    def check(allocation: tuple[str, ...]) -> bool:
        verdict = acceptable(allocation)
        tried.append((allocation, verdict))
        return verdict

    allocation = tuple(ladder[0] for _ in range(n_layers))
    if not check(allocation):
        allocation = tuple("fp32" for _ in range(n_layers))
        ladder = ["fp32", *ladder]
    for layer in order:
        for precision in ladder[ladder.index(allocation[layer]) + 1 :]:
            candidate = tuple(precision if i == layer else p for i, p in enumerate(allocation))
            if not check(candidate):
                break
            allocation = candidate
    return allocation, tried
