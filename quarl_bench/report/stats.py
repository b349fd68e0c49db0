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
