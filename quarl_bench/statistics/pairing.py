"""Episode pairing: two rows' rewards matched by episode identity (env index, episode number, reset seed).

The order invariant: every sequence that reads a batch (the mean's betting capital, the catastrophe rate, δ's
returns) reads it in the episodes' identity order, which is fixed before the batch is played. A row stores its
episodes in the order they finished (SB3's), and that order depends on the outcomes: the episodes that fail early
end first, and a running maximum of the capital read in that order crossed 1/α on them before the rest of the batch
was read (P(false safe) 0.24 at the boundary where fp32 failed half its episodes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def paired_rewards(
    quantized: Sequence[float] | np.ndarray,
    quantized_ids: Sequence[Sequence[int]],
    reference: Sequence[float] | np.ndarray,
    reference_ids: Sequence[Sequence[int]],
) -> tuple[np.ndarray, np.ndarray]:
    """The two rows' rewards on the episodes both played, matched by episode identity (env index, episode number,
    reset seed), in identity order (never the order the episodes finished in).

    :raises ValueError: when either row carries no episode identities (stored before they were recorded).
    """
    if not len(quantized_ids) or not len(reference_ids):
        raise ValueError("a row without episode identities: its episodes cannot be paired, evaluate it again")
    by_id = {tuple(identity): reward for identity, reward in zip(quantized_ids, quantized, strict=True)}
    matched = sorted((tuple(i), r) for i, r in zip(reference_ids, reference, strict=True) if tuple(i) in by_id)
    pairs = [(by_id[identity], r) for identity, r in matched]
    return np.array([q for q, _ in pairs], dtype=float), np.array([r for _, r in pairs], dtype=float)


def in_identity_order(rewards: Sequence[float] | np.ndarray, identities: Sequence[Sequence[int]]) -> np.ndarray:
    """One row's rewards in its episodes' identity order (a row without identities: as stored)."""
    values = np.asarray(rewards, dtype=float)
    if not len(identities):
        return values
    order = sorted(range(len(values)), key=lambda n: tuple(identities[n]))
    return values[order]


def unpaired_differences(
    quantized: Sequence[float] | np.ndarray,
    quantized_ids: Sequence[Sequence[int]],
    reference: Sequence[float] | np.ndarray,
    reference_ids: Sequence[Sequence[int]],
) -> np.ndarray:
    """Differences of two rows played on independent episodes (the unpaired design: trials that cannot share
    initial conditions), the i-th of each in identity order: independent pairs whose mean is the difference of the
    two policies' means, so the paired test reads them unchanged; pairing gains nothing here, and costs nothing."""
    q, r = in_identity_order(quantized, quantized_ids), in_identity_order(reference, reference_ids)
    n = min(len(q), len(r))
    return q[:n] - r[:n]
