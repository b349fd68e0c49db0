"""Verdicts do not depend on the order episodes finished in: a batch's pairs reach every sequence (the mean's
betting capital, the catastrophe rate, δ's returns) in the episodes' identity order, fixed before it was played."""

from __future__ import annotations

import numpy as np

from quarl_bench.certify.config import CertifyConfig
from quarl_bench.certify.plan import Certifier, Scale
from quarl_bench.statistics.certification import SequentialTest
from quarl_bench.statistics.pairing import in_identity_order, paired_rewards
from quarl_bench.types import AgentRef, QuantSpec

REF = AgentRef("dqn", "CartPole-v1", "CartPole-v1", "folder", "/nowhere", "0" * 64)


def batch_rows(order: str) -> tuple[dict, dict, np.ndarray]:
    """One batch of 20 paired CartPole episodes (returns in [0, 500]) where fp32 crashes early in 6 (the quantized
    policy balances those) and the quantized policy loses 170 in the other 14: mean difference -1 against δ 25. The
    rows hold the same episodes stored in ``order``: ``finishing`` (SB3's: the crashed fp32 episodes first, and so
    their pairs) or ``identity``."""
    ids = [(env, 0, 1000 + env) for env in range(20)]
    crashed = {3, 7, 11, 13, 16, 19}
    fp32 = {i: (20.0 if i[0] in crashed else 500.0) for i in ids}
    quantized = {i: (500.0 if i[0] in crashed else 330.0) for i in ids}
    fp32_order = sorted(ids, key=lambda i: (fp32[i], i)) if order == "finishing" else ids
    q_order = sorted(ids, key=lambda i: (quantized[i], i)) if order == "finishing" else ids

    def row(key: str, rewards: dict, ordered: list) -> dict:
        return {"key": key, "episode_rewards": [rewards[i] for i in ordered], "episode_ids": [list(i) for i in ordered]}

    d = np.array([quantized[i] - fp32[i] for i in fp32_order])
    return row("fp32", fp32, fp32_order), row("q", quantized, q_order), d


def verdict(order: str) -> str:
    config = CertifyConfig(tolerance_abs=25.0, catastrophe=250.0, max_episodes=20)
    certifier = Certifier(REF, config)
    fp32_row, q_row, _ = batch_rows(order)
    walk = certifier.certify(QuantSpec("int8"), Scale(25.0, "25 reward", (), np.zeros(0), np.zeros(0), 250.0))
    need = next(walk)
    rows = {need.jobs[0].key: fp32_row, need.jobs[1].key: q_row}
    try:
        walk.send(rows)
    except StopIteration as done:
        return done.value.verdict
    raise AssertionError("one batch of 20 was all it could play")


def test_a_batch_whose_finishing_order_tracks_its_differences_gets_the_identity_orders_verdict() -> None:
    # read in finishing order, the test itself says "safe": the +480 pairs come first and the capital's running
    # maximum crosses 1/alpha on them, before the -170 pairs are read
    test = SequentialTest("finite-sample", 0.04, (0.0, 500.0))
    finishing = batch_rows("finishing")[2]
    assert test.decide(finishing, (25.0, 25.0), (finishing < -250).astype(float), None) == "safe"
    assert verdict("finishing") == verdict("identity") != "safe"


def test_pairs_and_returns_come_in_identity_order_whatever_order_the_row_stored() -> None:
    fp32_row, q_row, _ = batch_rows("finishing")
    q, r = paired_rewards(
        q_row["episode_rewards"], q_row["episode_ids"], fp32_row["episode_rewards"], fp32_row["episode_ids"]
    )
    fp32_identity, q_identity, _ = batch_rows("identity")
    assert list(r) == fp32_identity["episode_rewards"] and list(q) == q_identity["episode_rewards"]
    returns = in_identity_order(fp32_row["episode_rewards"], fp32_row["episode_ids"])
    assert list(returns) == fp32_identity["episode_rewards"]


def scale_of(env_id: str, fp32_mean: float, **options) -> Scale:
    """δ's scale set where the fp32 policy scores ``fp32_mean`` and the random policy 100 in every episode."""
    ref = AgentRef("dqn", env_id, env_id, "folder", "/nowhere", "0" * 64)
    certifier = Certifier(ref, CertifyConfig(tolerance_abs=10.0, **options))
    walk = certifier.scale()
    need = next(walk)

    def row(key: str, value: float, count: int) -> dict:
        ids = [[env, 0, env] for env in range(count)]
        return {"key": key, "mean_reward": value, "episode_rewards": [value] * count, "episode_ids": ids}

    rows = {need.jobs[0].key: row("fp32", fp32_mean, 20), need.jobs[1].key: row("random", 100.0, 100)}
    try:
        walk.send(rows)
    except StopIteration as done:
        return done.value
    raise AssertionError("the scale set is one step")


def test_a_policy_no_better_than_random_still_gets_the_means_verdict() -> None:
    """The catastrophe bound never blocks: with --tolerance-abs the mean's test needs no R_random. Where fp32 does not
    beat random, the threshold is half the known return range, or (no bounds) not computed."""
    assert scale_of("CartPole-v1", 300.0).catastrophe == 100.0  # half of R_fp32 - R_random, as before
    bounded = scale_of("CartPole-v1", 100.0)
    assert bounded.catastrophe == 250.0 and bounded.catastrophe_source == "half the return range [0, 500]"
    unbounded = scale_of("LunarLander-v3", 100.0, guarantee="asymptotic")
    assert unbounded.catastrophe is None and unbounded.catastrophe_source.startswith("not computed")


def test_max_catastrophe_rate_without_a_threshold_is_refused_in_one_line() -> None:
    import pytest

    from quarl_bench.errors import QuarlError

    with pytest.raises(QuarlError, match="--max-catastrophe-rate 0.05 has no threshold to apply to") as refused:
        scale_of("LunarLander-v3", 100.0, guarantee="asymptotic", max_catastrophe_rate=0.05)
    assert "\n" not in str(refused.value)


def test_a_reused_exploratory_verdict_stays_exploratory_and_never_enters_the_minimum() -> None:
    """`certify --bits 8 6 5 4 --every-width` with int6 undetermined labels int5 and int4 exploratory; a later
    `certify --bits 5 4` reuses them: the minimum must not become "≤ int4"."""
    from quarl_bench.certify.result import Certification, Verdict

    def found(precision: str, exploratory: bool) -> Verdict:
        evidence = {"exploratory": True} if exploratory else {}
        return Verdict(precision, precision, "safe", 100, 0.0, -5.0, 5.0, 20.0, 0.05, reused=True, evidence=evidence)

    later = Certification(
        REF, 20.0, "5%", (), [found("int5", True), found("int4", True)], {"int5": "int", "int4": "int"}
    )
    assert later.minimum_safe is None and later.minimum_safe_text == "> int5"
    confirmed = Certification(REF, 20.0, "5%", (), [found("int5", False), found("int4", False)])
    assert confirmed.minimum_safe_text == "≤ int4"
