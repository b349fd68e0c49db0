"""The certification rule: a precision is safe, unsafe or undetermined against a tolerance δ on the mean paired
difference (quantized minus fp32 return), read from an anytime-valid confidence sequence after every batch.

:class:`SequentialTest` is the one decision certify, export, the validity benchmark and the report's fixed-sample
table all call. A ``finite-sample`` test bets on differences rescaled by the env's return bounds (valid at every
sample size); an ``asymptotic`` one reads the asymptotic sequence and decides nothing before ``min_pairs``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quarl_bench.statistics import GUARANTEES
from quarl_bench.statistics.betting import BETS, rejected
from quarl_bench.statistics.confidence_sequence import Interval, asymptotic_cs, asymptotic_radius, bounded_cs
from quarl_bench.types import QuantSpec

VERDICTS = ("safe", "unsafe", "undetermined")
EQUIVALENCE_VERDICTS = ("equivalent", "different", "undetermined")
PASSING = ("safe", "equivalent")  # the verdicts a walk goes on after (one-sided and two-sided)

ASYMPTOTIC_MIN_PAIRS = 100  # no asymptotic decision before this many pairs (docs/statistics.md: the benchmark)
DELTA_ALPHA_SHARE = 0.2  # the share of α spent on δ's own uncertainty when δ is a share of measured returns


@dataclass(frozen=True)
class SequentialTest:
    """How a run of paired differences is read: the guarantee, the one-sided level of each bound, the return
    bounds (finite-sample) and the asymptotic settings.

    :param guarantee: ``finite-sample`` (needs ``bounds``) or ``asymptotic``.
    :param alpha: each bound's one-sided level: a wrong "safe" (or a wrong "unsafe") has probability ≤ α.
    :param bounds: (lo, hi) every episode's return lies in; paired differences then lie in ±(hi - lo).
    :param min_pairs: asymptotic only: no decision before this many pairs.
    :param planned_pairs: asymptotic only: the t* the boundary is tightest at.
    :param bet: finite-sample only: ``plug-in`` (certify's) or ``hedged`` (``statistics/betting.py``).
    """

    guarantee: str
    alpha: float
    bounds: tuple[float, float] | None = None
    min_pairs: int = ASYMPTOTIC_MIN_PAIRS
    planned_pairs: int = 100
    bet: str = "plug-in"

    def __post_init__(self) -> None:
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"bad guarantee {self.guarantee!r}: expected one of {', '.join(GUARANTEES)}")
        if self.guarantee == "finite-sample" and self.bounds is None:
            raise ValueError("a finite-sample test needs return bounds")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"bad alpha {self.alpha:g}: expected a one-sided level in (0, 0.5)")
        if self.bet not in BETS:
            raise ValueError(f"bad bet {self.bet!r}: expected one of {', '.join(BETS)}")

    @property
    def finite(self) -> bool:
        return self.guarantee == "finite-sample"

    @property
    def span(self) -> float:
        """hi - lo: the largest paired difference either way."""
        assert self.bounds is not None
        return self.bounds[1] - self.bounds[0]

    def interval(self, differences: Sequence[float] | np.ndarray) -> Interval:
        """The sequence's one-sided bounds on the mean difference after all of ``differences``."""
        if self.finite:
            return bounded_cs(differences, -self.span, self.span, self.alpha, self.bet)
        return asymptotic_cs(differences, self.alpha, self.planned_pairs)

    def looks(self, differences: np.ndarray, threshold: float, side: int, at: np.ndarray) -> np.ndarray:
        """Whether, by each look ``at`` (0-based pair indices), the lower bound (``side=+1``) lies above
        ``threshold`` or the upper bound (``side=-1``) below it. ``differences`` may carry leading axes (many
        replications at once: the validity benchmark's); the result has them, and one last axis per look. The
        betting sequence's rejections are final (it is read at every pair); the asymptotic one is read at each look,
        and never before ``min_pairs``."""
        d = np.asarray(differences, dtype=float)
        at = np.asarray(at, dtype=int)
        if self.finite:
            level = (threshold + self.span) / (2 * self.span)
            return rejected((d + self.span) / (2 * self.span), level, side, self.alpha, bet=self.bet)[..., at]
        t = at + 1.0
        total, squares = np.cumsum(d, axis=-1)[..., at], np.cumsum(d**2, axis=-1)[..., at]
        mean = total / t
        spread = np.sqrt(np.maximum(squares / t - mean**2, 0.0))
        radius = asymptotic_radius(t, spread, self.alpha, self.planned_pairs)
        crossed = mean - radius > threshold if side > 0 else mean + radius < threshold
        return crossed & (t >= self.min_pairs)

    def above(self, differences: np.ndarray, threshold: float) -> bool:
        """Whether the lower bound lies above ``threshold`` after all of ``differences``."""
        return bool(self.looks(differences, threshold, +1, np.array([len(differences) - 1]))[-1])

    def below(self, differences: np.ndarray, threshold: float) -> bool:
        """Whether the upper bound lies below ``threshold`` after all of ``differences``."""
        return bool(self.looks(differences, threshold, -1, np.array([len(differences) - 1]))[-1])

    def decide(
        self,
        differences: Sequence[float] | np.ndarray,
        delta: float | tuple[float, float],
        catastrophes: Sequence[float] | np.ndarray | None = None,
        max_rate: float | None = None,
    ) -> str | None:
        """``safe`` once the mean difference is certified above ``-δ`` (and, with ``max_rate``, the catastrophe
        rate below it), ``unsafe`` once the mean is certified below ``-δ`` (or the rate above ``max_rate``), None
        while neither is (keep sampling).

        :param delta: δ, or (δ_low, δ_high): confidence bounds of an estimated δ; "safe" is then judged against
            δ_low and "unsafe" against δ_high, so the verdict holds against the δ the user asked for.
        :param catastrophes: 1 for each pair counted a catastrophe, else 0.
        """
        d = np.asarray(differences, dtype=float)
        rates = None if catastrophes is None else np.asarray(catastrophes, dtype=float)
        code = self.decide_looks(d, delta, np.array([len(d) - 1]), rates, max_rate)[-1]
        return {1: "safe", -1: "unsafe"}.get(int(code))

    def decide_looks(
        self,
        differences: np.ndarray,
        delta: float | tuple[float, float],
        at: np.ndarray,
        catastrophes: np.ndarray | None = None,
        max_rate: float | None = None,
    ) -> np.ndarray:
        """:meth:`decide` at each look ``at``, for differences with any leading axes: 1 safe, -1 unsafe, 0 neither
        (a run stops at its first nonzero look)."""
        low, high = delta if isinstance(delta, tuple) else (delta, delta)
        safe = self.looks(differences, -max(low, 0.0), +1, at)
        unsafe = self.looks(differences, -high, -1, at)
        if max_rate is not None:
            assert catastrophes is not None
            safe = safe & rejected(catastrophes, max_rate, -1, self.alpha)[..., at]
            unsafe = unsafe | rejected(catastrophes, max_rate, +1, self.alpha)[..., at]
        return np.where(unsafe, -1, np.where(safe, 1, 0))

    def equivalence(self, differences: Sequence[float] | np.ndarray, delta: float | tuple[float, float]) -> str | None:
        """``equivalent`` once the mean is certified inside (-δ, δ), ``different`` once certified outside, None
        while neither (each side at α: an "equivalent" verdict is wrong with probability ≤ α). With (δ_low, δ_high),
        "equivalent" is judged against δ_low and "different" against δ_high."""
        low, high = delta if isinstance(delta, tuple) else (delta, delta)
        d = np.asarray(differences, dtype=float)
        if self.above(d, -max(low, 0.0)) and self.below(d, max(low, 0.0)):
            return "equivalent"
        if self.above(d, high) or self.below(d, -high):
            return "different"
        return None

    def mean_interval(self, values: Sequence[float] | np.ndarray) -> Interval:
        """The sequence's bounds on the mean of one policy's returns (not a difference)."""
        if self.finite:
            assert self.bounds is not None
            return bounded_cs(values, *self.bounds, self.alpha)
        return asymptotic_cs(values, self.alpha, self.planned_pairs)


def rate_bound(catastrophes: Sequence[float] | np.ndarray, alpha: float) -> Interval:
    """One-sided (1 - α) bounds on the rate of catastrophic pairs (the mean of 0/1 values; finite-sample whatever
    the returns: a rate lies in [0, 1])."""
    return bounded_cs(np.asarray(catastrophes, dtype=float), 0.0, 1.0, alpha)


def tolerance_bounds(
    tolerance_pct: float,
    fp32_returns: Sequence[float] | np.ndarray,
    random_returns: Sequence[float] | np.ndarray,
    test: SequentialTest,
) -> tuple[float, float]:
    """(δ_low, δ_high): ``tolerance_pct``% of the lower and upper confidence bounds of (R_fp32 - R_random), each of
    the four one-sided bounds at ``test.alpha / 2``: δ_low ≤ δ at every look with probability ≥ 1 - α (and so is
    δ_high ≥ δ)."""
    half = SequentialTest(test.guarantee, test.alpha / 2, test.bounds, test.min_pairs, test.planned_pairs)
    fp32, random = half.mean_interval(fp32_returns), half.mean_interval(random_returns)
    share = tolerance_pct / 100
    return share * (fp32.lower - random.upper), share * (fp32.upper - random.lower)


def split_alpha(alpha: float, families: int, estimated_delta: bool) -> tuple[float, float]:
    """(the test's α, δ's α) for one family among ``families``: Bonferroni over families, and a
    :data:`DELTA_ALPHA_SHARE` of each family's α for δ's bounds when δ is estimated (else none). A wrong "safe"
    needs the test or δ_low to be wrong, so the two shares add up to the family's α."""
    family = alpha / max(families, 1)
    delta_share = DELTA_ALPHA_SHARE * family if estimated_delta else 0.0
    return family - delta_share, delta_share


def minimum_episodes(delta: float, span: float, alpha: float) -> int:
    """The fewest loss-free pairs any valid one-sided test needs to call a width safe: a mean of -δ can hide as
    losses of the whole ``span`` (hi - lo) in a share δ/span of episodes, ruled out once (1 - δ/span)^t ≤ α."""
    share = min(delta / span, 1.0)
    return 1 if share >= 1 else math.ceil(math.log(alpha) / math.log1p(-share))


def verdict(interval: Interval, delta: float) -> str | None:
    """``safe`` when the whole interval lies above ``-delta`` (the quantized policy loses less than δ),
    ``unsafe`` when it lies below, None while it straddles ``-delta`` (keep sampling)."""
    if interval.lower > -delta:
        return "safe"
    if interval.upper < -delta:
        return "unsafe"
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
    """The narrowest precision certified safe (or equivalent) with every wider one tried also so; ``verdicts`` is
    (precision, verdict) from the widest down. None when the widest is not."""
    safe = None
    for precision, decided in verdicts:
        if decided not in PASSING:
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
