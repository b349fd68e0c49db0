"""Does a certification hold the error rate it prints? Synthetic paired differences with a known mean, run through
:class:`~quarl_bench.statistics.certification.SequentialTest` (certify's own decision) look by look, many
replications at once. ``benchmarks/certify_validity.py`` prints every scenario; a test runs two short ones.

A scenario sits at the boundary (true mean exactly -δ: every "safe" is wrong) or at 0 (truly safe: every "unsafe"
is wrong). Differences are clipped to ±(hi - lo), as paired returns in [lo, hi] would be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quarl_bench.statistics.certification import SequentialTest

Sampler = Callable[[np.random.Generator, tuple[int, int], float], np.ndarray]


@dataclass(frozen=True)
class Scenario:
    """Paired differences of one shape: ``sample(rng, (reps, pairs), mean)`` draws them with the given true mean;
    ``delta`` is the tolerance, ``bounds`` the returns' range."""

    name: str
    sample: Sampler
    delta: float
    bounds: tuple[float, float]


@dataclass(frozen=True)
class ScenarioOutcome:
    """What one scenario's replications decided: shares of safe / unsafe verdicts, and the median pairs taken by
    those that decided (None when none did)."""

    safe: float
    unsafe: float
    median_pairs: float | None
    replications: int


def _centred(draw: Callable[[np.random.Generator, tuple[int, int]], np.ndarray], span: float) -> Sampler:
    """A sampler that shifts ``draw``'s clipped values to a requested mean (the shift estimated once, on 400k)."""
    probe = np.clip(draw(np.random.default_rng(12345), (400, 1000)), -span, span).mean()

    def sample(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
        return np.clip(draw(rng, shape) - probe + mean, -span, span)

    return sample


def crashes(rate: float, low: float, high: float) -> Sampler:
    """Identical episodes (difference 0) but for a share ``rate`` that lose U[low, high]; a mean of 0 is reached by
    as many episodes gaining as losing (so ``mean`` is either 0 or -rate·E[loss])."""
    loss = (low + high) / 2

    def sample(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
        crash = rng.random(shape) < rate
        size = rng.uniform(low, high, shape)
        if mean < 0:  # at the boundary: -rate · E[loss] = mean by construction
            assert abs(mean + rate * loss) < 1e-9, "crash scenarios are defined at -rate·E[loss] or at 0"
            return np.where(crash, -size, 0.0)
        gain = rng.random(shape) < rate
        return np.where(crash, -size, 0.0) + np.where(gain, size, 0.0)

    return sample


def cartpole_failures(loss_low: float = 300.0, loss_high: float = 491.0) -> Sampler:
    """fp32 always scores 500; the quantized policy fails (returns 9-200) in some episodes, the share set by the
    mean (0: it never fails)."""

    def sample(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
        rate = -mean / ((loss_low + loss_high) / 2)
        return np.where(rng.random(shape) < rate, -rng.uniform(loss_low, loss_high, shape), 0.0)

    return sample


def ties(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
    """Discrete differences with many exact ties: {-100, -50, 0, 50, 100}, tilted to the mean."""
    values = np.array([-100.0, -50.0, 0.0, 50.0, 100.0])
    base = np.array([0.1, 0.15, 0.5, 0.15, 0.1])
    tilt = np.array([1.0, 0.5, 0.0, -0.5, -1.0])  # moves the mean by -250 per unit, keeping the total 1
    return rng.choice(values, size=shape, p=base + tilt * (-mean / 250))


def scenarios() -> list[Scenario]:
    """The benchmark's scenarios (returns in [0, 500] unless named: paired differences in ±500)."""
    cartpole = (0.0, 500.0)
    return [
        Scenario("Gaussian sd 20", _centred(lambda r, s: r.normal(0, 20, s), 500), 17.5, cartpole),
        Scenario("Gaussian sd 80", _centred(lambda r, s: r.normal(0, 80, s), 500), 17.5, cartpole),
        *[
            Scenario(f"{rate:.1%} crashes losing 100-500", crashes(rate, 100, 500), rate * 300, cartpole)
            for rate in (0.01, 0.02, 0.035, 0.05, 0.10)
        ],
        Scenario("3.5% crashes losing 500", crashes(0.035, 500, 500), 0.035 * 500, cartpole),
        Scenario("Student t(3), scale 30", _centred(lambda r, s: 30 * r.standard_t(3, s), 500), 17.5, cartpole),
        Scenario(
            "lognormal, heavy left tail", _centred(lambda r, s: -np.exp(r.normal(2.5, 1.2, s)), 500), 17.5, cartpole
        ),
        Scenario("CartPole-like failures (delta 24)", cartpole_failures(), 23.97, cartpole),
        Scenario("discrete ties {0, ±50, ±100}", ties, 10.0, cartpole),
    ]


def discordant_pairs(agreement: float) -> Sampler:
    """Paired success differences in {-1, 0, 1}: both policies succeed or fail alike in a share ``agreement`` of
    the pairs; of the others, losses (-1) and gains (+1) in the shares that give the mean ``(gains - losses)``."""

    def sample(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
        losses, gains = round((1 - agreement - mean) / 2, 12), round((1 - agreement + mean) / 2, 12)
        assert losses >= 0 and gains >= 0, "a mean beyond the discordant share"
        draw = rng.random(shape)
        return np.where(draw < losses, -1.0, np.where(draw < losses + gains, 1.0, 0.0))

    return sample


def progress_pairs(rng: np.random.Generator, shape: tuple[int, int], mean: float) -> np.ndarray:
    """Paired progress in [0, 1]: fp32's Beta(8, 2) (mean 0.8); the quantized policy's the same draw but for a
    share of pairs where it stalls at a uniform share of fp32's progress, that share set by the mean."""
    reference = rng.beta(8, 2, shape)
    stalled = rng.uniform(0, 1, shape) * reference
    rate = -mean / float(0.8 * 0.5) if mean < 0 else 0.0  # E[reference - stalled] = 0.8 * 0.5
    return np.where(rng.random(shape) < rate, stalled, reference) - reference


def outcome_scenarios() -> list[Scenario]:
    """Success rates (differences in {-1, 0, 1}, bounds [0, 1]) at several agreements, and progress in [0, 1]."""
    rate = (0.0, 1.0)
    return [
        Scenario("success, 90% of pairs agree, eps 0.1", discordant_pairs(0.90), 0.10, rate),
        Scenario("success, 70% of pairs agree, eps 0.1", discordant_pairs(0.70), 0.10, rate),
        Scenario("success, 50% of pairs agree, eps 0.05", discordant_pairs(0.50), 0.05, rate),
        Scenario("success, 98% of pairs agree, eps 0.02", discordant_pairs(0.98), 0.02, rate),
        Scenario("progress stalls, eps 0.05", progress_pairs, 0.05, rate),
    ]


def independent_successes(rate: float) -> Episodes:
    """Two policies' successes drawn independently (no shared initial conditions: a real robot's trials): fp32
    succeeds with probability ``rate``, the quantized policy with ``rate + shift``."""

    def play(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
        successes = (rng.random(n) < rate + shift).astype(float)
        return successes, rng.integers(10, 100, n).astype(float)  # lengths: the order episodes finish in

    return play


def decided_at_looks(d: np.ndarray, test: SequentialTest, delta: float, batch: int, max_pairs: int) -> ScenarioOutcome:
    """Each replication (a row of ``d``) looked at after every ``batch`` pairs, stopping at its first decision."""
    looks = np.arange(batch - 1, max_pairs, batch)
    codes = test.decide_looks(d, delta, looks)
    decided = codes != 0
    first = np.where(decided.any(axis=-1), decided.argmax(axis=-1), -1)
    final = np.where(first >= 0, codes[np.arange(len(d)), np.maximum(first, 0)], 0)
    pairs = (looks[first[first >= 0]] + 1).astype(float)
    median = float(np.median(pairs)) if pairs.size else None
    return ScenarioOutcome(float((final == 1).mean()), float((final == -1).mean()), median, len(d))


def simulate(
    scenario: Scenario,
    test: SequentialTest,
    mean: float,
    replications: int,
    batch: int = 20,
    max_pairs: int = 1000,
    seed: int = 0,
) -> ScenarioOutcome:
    """Run ``replications`` certifications of ``scenario`` at true mean ``mean`` through ``test``, a look after each
    ``batch`` pairs up to ``max_pairs``, each stopping at its first decision."""
    rng = np.random.default_rng(seed)
    d = scenario.sample(rng, (replications, max_pairs), mean)
    return decided_at_looks(d, test, scenario.delta, batch, max_pairs)


# Batch-structured scenarios: whole episodes (return and length) of two independent policies, stored as certify
# stores them (each row in the order its episodes finished), paired as certify pairs them.

Episodes = Callable[[np.random.Generator, int, float], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class BatchScenario:
    """Two policies' episodes: ``play(rng, n, shift)`` draws n (returns, lengths) for fp32 (shift 0) or for the
    quantized policy (``shift``: the true mean difference it must have against fp32)."""

    name: str
    play: Episodes
    delta: float
    bounds: tuple[float, float]


def early_failures(rate: float) -> Episodes:
    """CartPole-like: a policy fails early (length and return U[10, 100]) in a share of episodes, else plays 500
    steps for 500; the quantized policy's failure share is set by its mean difference (failure costs 445 on
    average), independently of fp32's episodes."""

    def play(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
        failing = rng.random(n) < rate - shift / 445.0
        short = rng.uniform(10, 100, n).round()
        returns = np.where(failing, short, 500.0)
        return returns, returns.copy()

    return play


def falling_with_length(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Acrobot-like: -1 per step until the goal, so the return falls with the length (60 + Exp(25) steps, at most
    500); the quantized policy's episodes are longer by -shift on average."""
    lengths = np.minimum(60 + rng.exponential(25, n) - shift, 500).round()
    return -lengths, lengths


def batch_scenarios() -> list[BatchScenario]:
    cartpole, acrobot = (0.0, 500.0), (-500.0, 0.0)
    return [
        *[BatchScenario(f"fp32 fails early in {r:.0%}", early_failures(r), 20.0, cartpole) for r in (0.1, 0.25, 0.5)],
        BatchScenario("returns fall with length", falling_with_length, 5.0, acrobot),
    ]


def success_batch_scenarios() -> list[BatchScenario]:
    """Success rates of two independently drawn policies (``certify --outcome success``), stored as rows with
    ``episode_outcomes`` and decided through the Certifier's outcome path."""
    return [
        BatchScenario(f"success {r:.0%} vs {r - 0.1:.0%}", independent_successes(r), 0.1, (0.0, 1.0))
        for r in (0.9, 0.5)
    ]


def stored_batch(
    scenario: BatchScenario, rng: np.random.Generator, batch: int, shift: float
) -> tuple[tuple[list, list], tuple[list, list]]:
    """One paired batch as the store holds it: (rewards, identities) of fp32 and of the quantized policy, each in
    the order its episodes finished (by length, then env: what ``evaluate`` stores)."""
    rows = []
    for policy_shift in (0.0, shift):
        returns, lengths = scenario.play(rng, batch, policy_shift)
        order = sorted(range(batch), key=lambda i: (lengths[i], i))
        rows.append(([float(returns[i]) for i in order], [(i, 0, 1000 + i) for i in order]))
    return rows[0], rows[1]


def batched_differences(
    scenario: BatchScenario, replications: int, mean: float, max_pairs: int, batch: int, seed: int, order: str
) -> np.ndarray:
    """Paired differences (replications, max_pairs), batch by batch, read as certify reads stored rows:
    ``identity`` (:func:`~quarl_bench.statistics.pairing.paired_rewards`, certify's path now) or ``finishing``
    (the fp32 row's stored order, certify's path before issue 53)."""
    from quarl_bench.statistics.pairing import paired_rewards

    rng = np.random.default_rng(seed)
    out = np.zeros((replications, max_pairs))
    for rep in range(replications):
        for start in range(0, max_pairs, batch):
            (f_rewards, f_ids), (q_rewards, q_ids) = stored_batch(scenario, rng, batch, mean)
            if order == "identity":
                q, r = paired_rewards(q_rewards, q_ids, f_rewards, f_ids)
            else:
                by_id = dict(zip(q_ids, q_rewards, strict=True))
                q, r = np.array([by_id[i] for i in f_ids]), np.array(f_rewards)
            out[rep, start : start + batch] = q - r
    return out


def simulate_batched(
    scenario: BatchScenario,
    test: SequentialTest,
    mean: float,
    replications: int,
    order: str = "identity",
    batch: int = 20,
    max_pairs: int = 1000,
    seed: int = 0,
) -> ScenarioOutcome:
    """:func:`simulate` for a batch-structured scenario, its pairs read in ``order``."""
    d = batched_differences(scenario, replications, mean, max_pairs, batch, seed, order)
    return decided_at_looks(d, test, scenario.delta, batch, max_pairs)
