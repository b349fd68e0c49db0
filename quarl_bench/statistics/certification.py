"""The certification rule: a precision is safe, unsafe or undetermined against a tolerance δ on the mean paired
difference (quantized minus fp32 return), read from an anytime-valid confidence sequence."""

from __future__ import annotations

from collections.abc import Sequence

from quarl_bench.statistics.confidence_sequence import Interval
from quarl_bench.types import QuantSpec

VERDICTS = ("safe", "unsafe", "undetermined")
EQUIVALENCE_VERDICTS = ("equivalent", "different", "undetermined")


def verdict(interval: Interval, delta: float) -> str | None:
    """``safe`` when the whole interval lies above ``-delta`` (the quantized policy loses less than δ),
    ``unsafe`` when it lies below, None while it straddles ``-delta`` (keep sampling)."""
    if interval.lower > -delta:
        return "safe"
    if interval.upper < -delta:
        return "unsafe"
    return None


def equivalence(interval: Interval, delta: float) -> str | None:
    """``equivalent`` when the whole interval lies inside (-δ, δ) (neither policy earns δ more than the other),
    ``different`` when it lies wholly beyond one side, None while it straddles ``-δ`` or ``δ`` (keep sampling)."""
    if -delta < interval.lower and interval.upper < delta:
        return "equivalent"
    if interval.lower > delta or interval.upper < -delta:
        return "different"
    return None


def tolerance_delta(tolerance_pct: float, fp32_reward: float, random_reward: float) -> float:
    """δ = ``tolerance_pct``% of (R_fp32 - R_random): a share of what the policy earns above chance, which stays
    meaningful for negative or near-zero returns (where a share of |R_fp32| does not).

    :raises ValueError: when the fp32 policy does not beat the random one (no scale to take a share of).
    """
    span = fp32_reward - random_reward
    if not span > 0:
        raise ValueError(
            f"the fp32 policy ({fp32_reward:.2f}) does not beat a random one ({random_reward:.2f}): "
            "a share of the gap is no tolerance, pass --tolerance-abs in reward units"
        )
    return tolerance_pct / 100 * span


def minimum_safe(verdicts: Sequence[tuple[str, str]]) -> str | None:
    """The narrowest precision certified safe with every wider one tried also safe; ``verdicts`` is
    (precision, verdict) from the widest down. None when the widest is not safe."""
    safe = None
    for precision, decided in verdicts:
        if decided != "safe":
            break
        safe = precision
    return safe


def family(spec: QuantSpec) -> str:
    """The ladder a spec is walked on: the same grid and recipe, and integers (with fp16/bf16 above them), or one
    float format family (fp8-e4m3, fp8-e5m2, MX, NVFP4). Each family has its own certified minimum."""
    kind = spec.number_format.ladder
    grid = [spec.granularity] if spec.granularity != "auto" else []
    grid += ["symmetric"] if spec.symmetric else []
    grid += [spec.recipe_label()] if spec.recipe_label() else []
    grid += ["layers " + spec.layers] if spec.layers != "paper" else []
    if spec.layer_precisions:
        grid.append("per-layer")
    return " ".join([kind, *grid])
