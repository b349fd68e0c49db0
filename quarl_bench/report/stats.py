"""Small pure statistics over per-episode rewards."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats


def bootstrap_ci(rewards: Sequence[float], confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the mean (a constant sample gives a zero-width interval)."""
    values = np.asarray(rewards, dtype=float)
    if len(values) < 2 or np.all(values == values[0]):
        return float(values.mean()), float(values.mean())
    result = stats.bootstrap(
        (values,), np.mean, confidence_level=confidence, n_resamples=2000, method="percentile", random_state=seed
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def paired_ratio_ci(base: Sequence[float], other: Sequence[float], confidence: float = 0.95,
                    seed: int = 0) -> tuple[float, float, float]:  # fmt: skip
    """mean(base) / mean(other) and its paired percentile-bootstrap CI, resampling the pairs (seeds) together
    (fewer than two pairs: the ratio with a NaN interval)."""
    base_values, other_values = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    ratio = float(base_values.mean() / other_values.mean())
    if len(base_values) < 2:
        return ratio, float("nan"), float("nan")
    result = stats.bootstrap((base_values, other_values), lambda b, o: np.mean(b) / np.mean(o), paired=True,
                             confidence_level=confidence, n_resamples=2000, method="percentile", random_state=seed)  # fmt: skip
    return ratio, float(result.confidence_interval.low), float(result.confidence_interval.high)
