"""Episode pairing: two rows' rewards matched by episode identity (env index, episode number, reset seed)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def paired_rewards(
    quantized: Sequence[float],
    quantized_ids: Sequence[Sequence[int]],
    reference: Sequence[float],
    reference_ids: Sequence[Sequence[int]],
) -> tuple[np.ndarray, np.ndarray]:
    """The two rows' rewards on the episodes both played, matched by episode identity (env index, episode number,
    reset seed), in the reference's order.

    :raises ValueError: when either row carries no episode identities (stored before they were recorded).
    """
    if not len(quantized_ids) or not len(reference_ids):
        raise ValueError("a row without episode identities: its episodes cannot be paired, evaluate it again")
    by_id = {tuple(identity): reward for identity, reward in zip(quantized_ids, quantized, strict=True)}
    pairs = [(by_id[tuple(i)], r) for i, r in zip(reference_ids, reference, strict=True) if tuple(i) in by_id]
    return np.array([q for q, _ in pairs], dtype=float), np.array([r for _, r in pairs], dtype=float)
