"""A finite-horizon sequential test of two success rates on their discordant pairs, for a campaign with a cap.

Two policies play trials in pairs (paired: the same initial condition; unpaired: the i-th trial of each). A pair
where both succeed or both fail says nothing about which rate is higher; of the others ("discordant": one policy
only succeeds), the share won by the candidate is ``q = P(candidate only) / P(either only)``, and the candidate's
rate is above the reference's exactly when ``q > 1/2``, whatever the rates' common level: McNemar's conditioning,
which removes the nuisance parameter. Given ``k`` discordant pairs, the candidate's wins ``s`` are Binomial(k, q),
so every error probability below is computed exactly, not simulated.

The walk ``S = 2s - k`` (the candidate's successes minus the reference's) is read after every pair:

- **interim**: "better" once ``S ≥ c(k) √k``, "worse" once ``S ≤ -c(k) √k``, with ``c`` a Pocock-type constant, higher
  after the first discordant pairs (``EARLY_Z`` before ``SWITCH`` of them, ``LATE_Z`` after, in units of
  ``z_α / z_0.05``): a streak of wins decides early, a small gap is left to the end;
- **at the cap**: the α the interim looks left is spent in one final look, ``S ≥ f √k`` (Jennison & Turnbull's
  group-sequential design with error spending: interim boundary first, final critical value solved for exactly).

``f`` is solved so that the worst null's error is α: the chance of "better" when the rates are equal, maximised over
the discordance rate ``d`` the design allows (unpaired: ``d = 2p(1 - p) ≤ 1/2``; paired: any ``d ≤ 1``); the walk
does not depend on ``d``, only how many of its steps the cap lets through (Binomial(cap, d)). "Worse" is the mirror
image, at α too. The constants were chosen on STEP's 45 pairs (Snyder et al., RSS 2025; cap 500, α 0.05) to reach
STEP's power on every pair with fewer trials on most (``benchmarks/trial_counts.py``,
``docs/results-of-record/trial_counts.md``); the validity is exact for any constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np
from scipy import stats

EARLY_Z, LATE_Z, SWITCH = 2.6, 3.0, 20  # at α = 0.05: interim z before and after SWITCH discordant pairs
INTERIM_SHARE = 0.8  # the interim looks may spend at most this share of α (else their constants are raised)
DESIGNS = ("paired", "unpaired")
NUISANCE_GRID = 201  # discordance rates the worst null is searched over


@dataclass(frozen=True)
class Operating:
    """What the test does at given rates, exactly: P(better), P(worse) by the cap, and the mean pairs spent."""

    better: float
    worse: float
    mean_pairs: float


@dataclass(frozen=True)
class DiscordantPairTest:
    """The finite-horizon test at one-sided level ``alpha`` (each direction), ``cap`` pairs at most."""

    alpha: float
    cap: int
    design: str = "unpaired"

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"bad alpha {self.alpha:g}: expected a one-sided level in (0, 0.5)")
        if self.cap < 1:
            raise ValueError(f"bad cap {self.cap}: expected at least one pair")
        if self.design not in DESIGNS:
            raise ValueError(f"bad design {self.design!r}: expected one of {', '.join(DESIGNS)}")

    @property
    def _boundaries(self) -> tuple[np.ndarray, np.ndarray]:
        """(interim, final): the least ``S`` deciding "better" after ``k`` discordant pairs, k = 0..cap (solved once
        per level, cap and design in a process: a live campaign asks after every trial)."""
        return _solved(self)

    def _solve(self) -> tuple[np.ndarray, np.ndarray]:
        scale = stats.norm.isf(self.alpha) / stats.norm.isf(0.05)
        while self._worst_error(self._interim(scale), None) > INTERIM_SHARE * self.alpha:
            scale *= 1.05
        interim = self._interim(scale)
        crossed, alive = self._walk(0.5, interim)
        low, high = 0.0, 10 * LATE_Z * scale  # at ``high`` the final look is the interim one: error ≤ α
        for _ in range(40):  # the final z: the least whose worst null error is ≤ α
            middle = (low + high) / 2
            fits = self._worst_error(interim, self._final(middle, interim), (crossed, alive)) <= self.alpha
            low, high = (low, middle) if fits else (middle, high)
        return interim, self._final(high, interim)

    def _interim(self, scale: float) -> np.ndarray:
        k = np.arange(self.cap + 1)
        least = np.where(k < SWITCH, EARLY_Z, LATE_Z) * scale * np.sqrt(k)
        least[0] = np.inf
        return _reachable(least, k)

    def _final(self, z: float, interim: np.ndarray) -> np.ndarray:
        k = np.arange(self.cap + 1)
        least = z * np.sqrt(k)
        least[0] = np.inf
        return np.minimum(_reachable(least, k), interim)

    def _walk(self, q: float, interim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The sign walk with P(win) = q: P(first interim "better" at discordant step j) for j = 0..cap, and the
        mass still undecided after each step over its wins s (rows k, columns s)."""
        cap = self.cap
        wins = np.arange(cap + 2)
        alive = np.zeros((cap + 1, cap + 2))
        alive[0, 0] = 1.0
        crossed = np.zeros(cap + 1)
        for k in range(1, cap + 1):
            step = alive[k - 1] * (1 - q)
            step[1:] += alive[k - 1, :-1] * q
            walk = 2 * wins - k
            better, worse = walk >= interim[k], walk <= -interim[k]
            crossed[k] = step[better].sum()
            step[better | worse] = 0.0
            alive[k] = step
        return crossed, alive

    @cached_property
    def _nuisance(self) -> tuple[np.ndarray, np.ndarray]:
        """Over the discordance rates the design allows: P(the j-th discordant pair comes by the cap), j = 1..cap,
        and P(k discordant pairs by the cap), k = 0..cap (rows: rates)."""
        top = 0.5 if self.design == "unpaired" else 1.0
        rates = np.linspace(0, top, NUISANCE_GRID)[1:, None]
        steps = np.arange(1, self.cap + 1)[None, :]
        return stats.binom.sf(steps - 1, self.cap, rates), stats.binom.pmf(np.arange(self.cap + 1), self.cap, rates)

    def _at_cap(self, alive: np.ndarray, final: np.ndarray, side: int) -> np.ndarray:
        """P(the final look decides ``side``) given k discordant pairs by the cap, k = 0..cap."""
        walk = 2 * np.arange(self.cap + 2)[None, :] - np.arange(self.cap + 1)[:, None]
        decides = walk >= final[:, None] if side > 0 else walk <= -final[:, None]
        return (alive * decides).sum(axis=1)

    def _worst_error(
        self,
        interim: np.ndarray,
        final: np.ndarray | None,
        walked: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> float:
        """P("better") at equal rates, maximised over the discordance rates the design allows."""
        crossed, alive = walked or self._walk(0.5, interim)
        within, by_cap = self._nuisance
        errors = within @ crossed[1:]
        if final is not None:
            errors = errors + by_cap @ self._at_cap(alive, final, +1)
        return float(errors.max())

    @property
    def interim(self) -> np.ndarray:
        return self._boundaries[0]

    @property
    def final(self) -> np.ndarray:
        return self._boundaries[1]

    def boundary(self, discordant: int, final: bool = False) -> int | None:
        """The walk's distance from 0 that decides after ``discordant`` discordant pairs (the final look's at the
        cap); None where no walk decides yet."""
        least = (self.final if final else self.interim)[min(discordant, self.cap)]
        return int(least) if np.isfinite(least) and least <= discordant else None

    def worst_null_error(self) -> float:
        """The exact worst error at equal rates (≤ α by construction)."""
        return self._worst_error(*self._boundaries)

    def decide_looks(self, differences: np.ndarray, at: np.ndarray) -> np.ndarray:
        """1 ("better": the candidate's rate is above), -1 ("worse"), 0 (neither yet) after each look ``at`` (0-based
        pair indices), for differences candidate - reference in {-1, 0, 1} with any leading axes; the pair at index
        ``cap - 1`` is the final look. The first decision holds from its pair on: later pairs are not read."""
        d = np.asarray(differences, dtype=float)
        walk = np.cumsum(d, axis=-1)
        k = np.minimum(np.cumsum(d != 0, axis=-1), self.cap)
        interim, final = self._boundaries
        least = np.where(np.arange(d.shape[-1]) >= self.cap - 1, final[k], interim[k])
        codes = np.where(walk >= least, 1, np.where(walk <= -least, -1, 0))
        return _hold_first(codes)[..., np.asarray(at, dtype=int)]

    def operating(self, candidate_only: float, reference_only: float) -> Operating:
        """Exact P(better), P(worse) and mean pairs when each pair is won by the candidate alone with probability
        ``candidate_only`` and by the reference alone with ``reference_only`` (unpaired rates a, b: a(1 - b) and
        b(1 - a))."""
        d = candidate_only + reference_only
        if d <= 0:
            return Operating(0.0, 0.0, float(self.cap))
        interim, final = self._boundaries
        q = candidate_only / d
        better_walk, alive = self._walk(q, interim)
        worse_walk, _ = self._walk(1 - q, interim)  # "worse" is "better" for the mirrored walk
        steps = np.arange(1, self.cap + 1)
        within = stats.binom.sf(steps - 1, self.cap, d)
        by_cap = stats.binom.pmf(np.arange(self.cap + 1), self.cap, d)
        better = float(better_walk[1:] @ within + by_cap @ self._at_cap(alive, final, +1))
        worse = float(worse_walk[1:] @ within + by_cap @ self._at_cap(alive, final, -1))
        stopped = better_walk[1:] + worse_walk[1:]
        # E[min(τ_j, cap)] for the index τ_j of the j-th discordant pair: the sum over n < cap of P(fewer than j by n)
        expected_index = stats.binom.cdf(steps[None, :] - 1, np.arange(self.cap)[:, None], d).sum(axis=0)
        return Operating(better, worse, float(stopped @ expected_index + (1 - stopped.sum()) * self.cap))


@cache
def _solved(test: DiscordantPairTest) -> tuple[np.ndarray, np.ndarray]:
    return test._solve()


def _reachable(least: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The least walk value ``S = 2s - k`` at or above ``least`` with the parity of ``k`` (inf stays inf)."""
    finite = np.isfinite(least)
    out = np.full(least.shape, np.inf)
    ceil = np.ceil(least[finite] - 1e-9)
    out[finite] = ceil + ((ceil - k[finite]) % 2)
    return out


def _hold_first(codes: np.ndarray) -> np.ndarray:
    """Each row's first nonzero code, repeated from its position to the end (zeros before it)."""
    nonzero = codes != 0
    seen = np.maximum.accumulate(nonzero, axis=-1)
    first_index = np.where(nonzero.any(axis=-1), nonzero.argmax(axis=-1), codes.shape[-1])
    first = np.take_along_axis(codes, np.minimum(first_index, codes.shape[-1] - 1)[..., None], axis=-1)
    return np.where(seen, first, 0)
