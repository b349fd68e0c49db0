"""Quantized-rollout diagnostics and corrections on hand-computed distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Normal

from quarl_bench.training.mismatch import concat_distributions, correction_weights, greedy_agreement, mismatch_stats


def two_states() -> tuple[Categorical, Categorical, torch.Tensor, torch.Tensor]:
    """π = [0.5, 0.5] and π_q = [0.8, 0.2] in two states; π_q took action 0 in the first, 1 in the second."""
    p = Categorical(probs=torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64))
    q = Categorical(probs=torch.tensor([[0.8, 0.2], [0.8, 0.2]], dtype=torch.float64))
    actions = torch.tensor([0, 1])
    return p, q, p.log_prob(actions), q.log_prob(actions)


def test_discrete_mismatch_matches_hand_computation() -> None:
    p, q, log_p, log_q = two_states()
    stats = mismatch_stats(p, q, log_p, log_q, cap=2.0)
    # KL(q || p) = 0.8 ln 1.6 + 0.2 ln 0.4; ratios π/π_q are 0.625 and 2.5
    assert stats["kl"] == pytest.approx(0.8 * math.log(1.6) + 0.2 * math.log(0.4))
    k3 = np.mean([r - 1 - math.log(r) for r in (0.625, 2.5)])
    assert stats["kl_k3"] == pytest.approx(k3)
    assert stats["ratio_mean"] == pytest.approx((0.625 + 2.5) / 2)
    assert stats["ratio_max"] == pytest.approx(2.5)
    assert stats["share_capped"] == 0.5  # 2.5 > C
    assert stats["share_masked"] == 0.5  # 0.625 lies inside [1/2, 2]
    assert stats["agreement"] == 1.0  # ties broken the same way: argmax 0 for both
    assert stats["entropy_fp32"] == pytest.approx(math.log(2))
    assert stats["entropy_behaviour"] == pytest.approx(-(0.8 * math.log(0.8) + 0.2 * math.log(0.2)))


def test_identical_policies_show_no_mismatch() -> None:
    p = Categorical(logits=torch.randn(50, 3))
    actions = p.sample()
    stats = mismatch_stats(p, p, p.log_prob(actions), p.log_prob(actions), cap=2.0)
    assert (stats["kl"], stats["kl_k3"], stats["share_masked"], stats["agreement"]) == (0.0, 0.0, 0.0, 1.0)
    assert stats["ratio_mean"] == stats["ratio_max"] == 1.0


def test_corrections_weigh_the_samples() -> None:
    _, _, log_p, log_q = two_states()
    assert correction_weights(log_p, log_q, "tis", 2.0).tolist() == pytest.approx([0.625, 2.0])
    assert correction_weights(log_p, log_q, "mis", 2.0).tolist() == [1.0, 0.0]
    assert correction_weights(log_p, log_q, "none", 2.0).tolist() == [1.0, 1.0]


def test_gaussian_kl_and_agreement() -> None:
    q = Normal(torch.zeros(1, 2), torch.ones(1, 2))
    p = Normal(torch.ones(1, 2), 2 * torch.ones(1, 2))
    actions = torch.zeros(1, 2)
    stats = mismatch_stats(
        p, q, p.log_prob(actions).sum(-1), q.log_prob(actions).sum(-1), 2.0, -2 * np.ones(2), 2 * np.ones(2)
    )
    # KL(N(0,1) || N(1,4)) = ln 2 + (1 + 1) / 8 - 1/2 per dimension, summed over both
    assert stats["kl"] == pytest.approx(2 * (math.log(2) + 0.25 - 0.5), rel=1e-6)
    assert stats["agreement"] == pytest.approx(0.75)  # |0 - 1| is a quarter of the [-2, 2] range
    # means beyond the bounds are clipped first: 5 and 3 both act at 2
    far = greedy_agreement(
        Normal(torch.full((1, 1), 5.0), torch.ones(1, 1)),
        Normal(torch.full((1, 1), 3.0), torch.ones(1, 1)),
        np.array([-2.0]),
        np.array([2.0]),
    )
    assert far == 1.0


def test_per_step_distributions_concatenate_in_order() -> None:
    parts = [Categorical(logits=torch.randn(4, 3)) for _ in range(3)]
    joined = concat_distributions(parts)
    assert torch.allclose(joined.probs, torch.cat([p.probs for p in parts]))
    normals = concat_distributions(
        [Normal(torch.zeros(2, 1), torch.ones(2, 1)), Normal(torch.ones(3, 1), torch.ones(3, 1))]
    )
    assert normals.loc.flatten().tolist() == [0, 0, 1, 1, 1]
