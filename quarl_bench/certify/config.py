"""How precisions are certified: :class:`CertifyConfig`, validated as it is made (one line per bad value), and the
version that says what a stored verdict means."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from quarl_bench.certify.outcome import check_outcome
from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.judge_identity import rule_identity
from quarl_bench.statistics import GUARANTEES, TOLERANCE_PCT
from quarl_bench.zoo.return_bounds import ReturnBounds

CERTIFY_VERSION = 2  # bump when the procedure changes what a verdict means: stored verdicts are then not reused
# (2: finite-sample betting sequences on return bounds, δ's own bounds, α split over families, catastrophe rates)

EXPORT_MAX_EPISODES = 200  # an export's closed-loop certification: paired episodes before it is undetermined


@dataclass(frozen=True)
class CertifyConfig:
    """How precisions are certified.

    :param tolerance: δ as a percentage of (R_fp32 - R_random), in (0, 100).
    :param tolerance_abs: δ in reward units instead (then δ is not estimated, and spends no α).
    :param confidence: 1 - α: a "safe" verdict is wrong with probability ≤ α (α is split over the call's families
        and, for an estimated δ, between δ's bounds and the test: docs/statistics.md).
    :param batch: paired episodes per look.
    :param max_episodes: paired episodes after which a precision still straddling ``-δ`` is undetermined.
    :param planned_episodes: the t* the asymptotic sequence is tightest at.
    :param seed: the seed base every batch seed comes from; two bases give independent certifications.
    :param n_envs: envs per batch (default per env kind, at most ``batch``).
    :param every_width: go on below the first precision that is not safe (those verdicts are exploratory).
    :param guarantee: finite-sample (valid at every sample size, on return bounds) or asymptotic (no bounds, valid
        as episodes grow); default: finite-sample where the env's return bounds are known.
    :param return_bounds: (LO, HI) every episode's return lies in (default: the env's bounds in
        :data:`~quarl_bench.zoo.return_bounds.RETURN_BOUNDS`, docs/statistics.md).
    :param catastrophe: a pair is a catastrophe when the quantized return falls below fp32's by more than this
        (default: half of R_fp32 - R_random).
    :param max_catastrophe_rate: "safe" also needs the catastrophe rate certified below this share, in (0, 1).
    :param random_episodes: the random policy's episodes in the scale set (its mean's bound sets δ_low).
    :param outcome: what is certified per paired episode: return, success (the rate: --tolerance-abs is the ε it may
        fall), progress (in [0, 1]) or cost (lower is better; --return-bounds is its range).
    :param success: what counts as a success: info (``info["is_success"]`` at the episode's end), terminated (it
        ended on its own), truncated (a time limit cut it: CartPole's balance), ``return>=X``, or a function of the
        episode, FILE.py:FN or package.module:FN (evaluation/judges.py's Episode; its truth is the success).
    :param progress: what an episode's progress is: info (``info["progress"]`` at its end) or a function of the
        episode, FILE.py:FN, returning a share in [0, 1].
    :param perturb: the condition every paired episode plays under, fp32's and the quantized policy's alike (the
        scale set's too): NAME=SEVERITY,... (docs/evaluation.md); '' = the nominal simulator. A severity grid
        (``obs-noise=0.05/0.1/0.2``) certifies each condition, α shared family-wise over all of them.
    :param equivalence: the two-sided question: is the quantized policy's mean within ±δ (±ε) of fp32's, not
        only not more than δ below it ("equivalent", "different" or "undetermined"; each side at α).
    :param unpaired: the quantized policy plays other episodes than fp32 (independent seeds), as trials on a real
        robot cannot share initial conditions: the same test, on differences of independent trials (more of them).
    """

    tolerance: float = TOLERANCE_PCT
    tolerance_abs: float | None = None
    confidence: float = 0.95
    batch: int = 20
    max_episodes: int = 1000
    planned_episodes: int = 100
    seed: int = 0
    n_envs: int | None = None
    every_width: bool = False
    guarantee: str | None = None
    return_bounds: tuple[float, float] | None = None
    catastrophe: float | None = None
    max_catastrophe_rate: float | None = None
    random_episodes: int = 300  # 100 left δ_low 1.64x the floor for identical play; random episodes are cheap
    outcome: str = "return"
    success: str = "info"
    progress: str = "info"
    perturb: str = ""
    unpaired: bool = False
    equivalence: bool = False

    def __post_init__(self) -> None:
        if self.tolerance_abs is None and not 0 < self.tolerance < 100:
            raise QuarlError(
                f"bad tolerance {self.tolerance:g}: expected a percentage of (R_fp32 - R_random) in (0, 100)"
            )
        if self.tolerance_abs is not None and not self.tolerance_abs > 0:
            raise QuarlError(f"bad absolute tolerance {self.tolerance_abs:g}: expected a reward difference > 0")
        if not 0.5 < self.confidence < 1:
            raise QuarlError(f"bad confidence {self.confidence:g}: expected a level in (0.5, 1), e.g. 0.95")
        if self.batch < 2:
            raise QuarlError(f"bad batch {self.batch}: expected at least 2 paired episodes per look")
        if self.max_episodes < self.batch:
            raise QuarlError(
                f"bad max episodes {self.max_episodes}: expected at least one batch ({self.batch} episodes)"
            )
        if self.planned_episodes < 1:
            raise QuarlError(f"bad planned episodes {self.planned_episodes}: expected an integer >= 1")
        if self.guarantee is not None and self.guarantee not in GUARANTEES:
            raise QuarlError(f"bad guarantee {self.guarantee!r}: expected one of {', '.join(GUARANTEES)}")
        if self.return_bounds is not None:
            object.__setattr__(self, "return_bounds", tuple(float(b) for b in self.return_bounds))
            ReturnBounds(*self.return_bounds, "")  # LO < HI, both finite: one line otherwise
        if self.catastrophe is not None and not self.catastrophe > 0:
            raise QuarlError(f"bad catastrophe {self.catastrophe:g}: expected a return loss R > 0")
        if self.max_catastrophe_rate is not None and not 0 < self.max_catastrophe_rate < 1:
            raise QuarlError(
                f"bad max catastrophe rate {self.max_catastrophe_rate:g}: expected a share in (0, 1), e.g. 0.05"
            )
        if self.random_episodes < 2:
            raise QuarlError(f"bad random episodes {self.random_episodes}: expected an integer >= 2")
        check_outcome(self.outcome, self.success, self.tolerance_abs, self.return_bounds, self.progress)
        if self.outcome != "return" and (self.catastrophe is not None or self.max_catastrophe_rate is not None):
            raise QuarlError(
                f"--catastrophe and --max-catastrophe-rate judge return losses: not with --outcome {self.outcome}"
            )

    @property
    def alpha(self) -> float:
        return 1 - self.confidence

    def identity(self) -> dict[str, Any]:
        """What decides a verdict besides the agent and the precision (``every_width`` decides nothing)."""
        fields = asdict(self)
        del fields["every_width"], fields["n_envs"]
        if self.outcome == "return":  # keys of return verdicts stay those stored before outcomes existed
            del fields["outcome"], fields["success"]
        elif self.outcome != "success":
            del fields["success"]
        if self.outcome != "progress" or self.progress == "info":  # keys stored before progress rules existed
            del fields["progress"]
        if not self.perturb:  # nor those of verdicts on the nominal simulator
            del fields["perturb"]
        if not self.unpaired:  # nor those of paired verdicts
            del fields["unpaired"]
        if not self.equivalence:  # nor those of one-sided verdicts
            del fields["equivalence"]
        fields["return_bounds"] = list(self.return_bounds) if self.return_bounds else None
        for rule in ("success", "progress"):  # a function rule with its source's hash: an edited judge is new
            if rule in fields:
                fields[rule] = rule_identity(fields[rule], f"--{rule}")
        fields["version"] = CERTIFY_VERSION
        return fields
