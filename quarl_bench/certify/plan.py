"""Certify precisions: a sequential paired test per precision, widest first, each decided safe, unsafe or
undetermined by an anytime-valid confidence sequence on the mean paired difference (quantized - fp32 return).

One run, top to bottom:

1. the tolerance δ: ``tolerance_abs``, or ``tolerance``% of (R_fp32 - R_random), both policies measured once on a
   scale set of episodes of their own (stored rows, never the episodes the test then plays);
2. per precision, batches of ``batch`` paired episodes: batch ``b`` is an ordinary stored job pair (fp32 and the
   precision) with evaluation seed :func:`batch_seed`, so every episode has its own reset seed and identity and the
   fp32 batches serve every precision; after each batch the pairs so far give the sequence's interval;
3. ``safe`` once the interval lies above ``-δ``, ``unsafe`` once below, ``undetermined`` at ``max_episodes``;
4. the verdict is stored with the keys of the rows behind it. A stored verdict is reused, and an interrupted run
   finds its stored batches and continues from there.

This module plans and decides, and stores nothing: :class:`Certifier`'s steps yield the jobs they need, and the
driver (``quarl_bench/certify/driver.py``) has them run on any executor, stores rows and verdicts, and walks many
agents and families side by side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from quarl_bench.certify.config import CertifyConfig
from quarl_bench.certify.outcome import arm_outcomes, outcome_bounds, outcome_rule, outcome_values, success_rule
from quarl_bench.certify.result import Verdict
from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.judges import judge_text
from quarl_bench.statistics.certification import (
    SequentialTest,
    family,
    minimum_episodes,
    rate_bound,
    split_alpha,
    tolerance_bounds,
    tolerance_delta,
)
from quarl_bench.statistics.pairing import in_identity_order, paired_rewards, unpaired_differences
from quarl_bench.statistics.wording import spec_name
from quarl_bench.types import AgentRef, DeployTarget, Job, QuantSpec, spec_identity
from quarl_bench.zoo.forms import form_of
from quarl_bench.zoo.return_bounds import ReturnBounds, check_returns, return_bounds

FP32 = QuantSpec("fp32")
SCALE_STREAM = 2**31  # batch_seed's stream for the scale set (δ's fp32 and random episodes)
UNPAIRED_STREAM = 2**30  # batch_seed's stream for an unpaired certification's quantized episodes


@dataclass(frozen=True)
class Scale:
    """What the scale set says: δ (point estimate), its wording, the scale rows' keys, both policies' returns and
    the catastrophe threshold."""

    delta: float
    text: str
    rows: tuple[str, ...]
    fp32_returns: np.ndarray
    random_returns: np.ndarray
    catastrophe: float | None  # None: no threshold to count catastrophes by (the mean's verdict stands alone)
    catastrophe_source: str = "--catastrophe"


def batch_seed(seed: int, batch: int) -> int:
    """The evaluation seed of batch ``batch`` of a certification seeded ``seed``: batch 0 is ``seed`` itself, later
    batches a hash of both, so two seed bases never share a batch."""
    if batch == 0:
        return seed
    return int(np.random.SeedSequence([seed, batch]).generate_state(1)[0] >> 1)


def widest_first(specs: tuple[QuantSpec, ...], keep_fp32: bool = False) -> list[QuantSpec]:
    """Families in the order their widest spec comes, each family widest first; fp32 only with ``keep_fp32`` (a
    certification against a baseline agent), first, alone in its family."""
    kept = (s for s in specs if keep_fp32 or not s.is_identity)
    ordered = sorted(dict.fromkeys(kept), key=lambda s: (not s.is_identity, -s.bits, spec_name(s)))
    families = list(dict.fromkeys(walk_family(s) for s in ordered))
    return sorted(ordered, key=lambda s: families.index(walk_family(s)))


Rows = dict[str, Any]  # the stored rows a step asked for, by job key (an optional job: None until stored)


@dataclass(frozen=True)
class Need:
    """What a certification step needs before it goes on: ``jobs`` evaluated and stored (their rows are sent back),
    and the rows of ``optional`` jobs where some earlier step stored them (never evaluated for this)."""

    jobs: tuple[Job, ...]
    optional: tuple[Job, ...] = ()


@dataclass(frozen=True)
class Question:
    """One verdict to decide: ``spec`` (or, with ``target``, that deployed artifact) against the baseline's
    ``reference`` (fp32 by default), one-sided safe / unsafe, or with ``equivalence`` two-sided; ``test`` names the
    test in the verdict's settings (export's); ``by``: the method whose registered evaluator plays the questioned
    policy (``ptq``: quantize and play)."""

    spec: QuantSpec
    reference: QuantSpec = FP32
    equivalence: bool = False
    test: str = ""
    target: DeployTarget | None = None
    by: str = "ptq"

    def __post_init__(self) -> None:
        if self.target is not None:
            object.__setattr__(self, "spec", self.target.spec)

    @property
    def method(self) -> str:
        """The method that plays the questioned policy: ``deploy`` for an artifact, else ``by``."""
        return "deploy" if self.target is not None else self.by


@dataclass(frozen=True)
class Ladder:
    """Questions answered in order. A walk (``stops``) ends at its first answer that is not safe; answers past it
    are exploratory (``every_width``) or not asked. Without ``stops`` every question is answered."""

    questions: tuple[Question, ...]
    stops: bool = True


@dataclass(frozen=True)
class CertifyRequest:
    """One agent's certification: its ladders (one per family, walked side by side), how (``settings``), and
    against whose fp32 (``baseline``: a hardened agent's parent; None: its own). α is split over ``families``."""

    ref: AgentRef
    ladders: tuple[Ladder, ...]
    settings: CertifyConfig = field(default_factory=CertifyConfig)
    baseline: AgentRef | None = None
    families: int = 1


def ladders(
    specs: tuple[QuantSpec, ...], keep_fp32: bool = False, by: str = "ptq", equivalence: bool = False
) -> tuple[Ladder, ...]:
    """Certify's walks: the specs by family (:func:`walk_family`), each widest first (:func:`widest_first`), each
    played by method ``by``; with ``equivalence`` each question is two-sided against fp32."""
    by_family: dict[str, list[QuantSpec]] = {}
    for spec in widest_first(specs, keep_fp32):
        by_family.setdefault(walk_family(spec), []).append(spec)
    return tuple(
        Ladder(tuple(Question(s, equivalence=equivalence, by=by) for s in family)) for family in by_family.values()
    )


class Certifier:
    """Plans and decides one agent's certification, and touches no store: its steps are generators that yield the
    jobs they need (:class:`Need`) and are sent those jobs' stored rows back by a driver (``certify/driver.py``),
    which has them evaluated on any executor and stores them.

    :param baseline: the agent whose fp32 episodes the differences are taken against, and whose rewards set δ (a
        hardened agent's parent); None: the agent itself. Both play the same seeded episodes, paired one to one.
    :raises QuarlError: for a finite-sample guarantee asked on an env with no known return bounds.
    """

    def __init__(self, ref: AgentRef, config: CertifyConfig, baseline: AgentRef | None = None) -> None:
        from quarl_bench.jobs.grids import action_mode
        from quarl_bench.zoo.envs import default_eval_envs

        self.ref, self.config = ref, config
        self.baseline = baseline or ref
        if self.baseline.env_id != ref.env_id:
            raise QuarlError(
                f"bad baseline {self.baseline.algo}/{self.baseline.env_id}: expected an agent on {ref.env_id}, "
                "whose episodes pair with this agent's"
            )
        self.bounds = outcome_bounds(config.outcome, config.return_bounds, ref.env_id) or return_bounds(
            ref.env_id, config.return_bounds
        )
        self.guarantee = config.guarantee or ("finite-sample" if self.bounds else "asymptotic")
        if self.guarantee == "finite-sample" and self.bounds is None:
            raise QuarlError(
                f"no known return bounds for {ref.env_id}: a finite-sample guarantee needs --return-bounds LO HI "
                "(every episode's return in [LO, HI]), or pass --guarantee asymptotic"
            )
        self.n_envs = min(config.n_envs or default_eval_envs(ref.env_id), config.batch)
        self.actions = action_mode(ref)

    @property
    def return_bounds_checked(self) -> ReturnBounds | None:
        """The bounds every played return is checked against before its row is stored: the guarantee's, when it
        rests on returns (an outcome's own range is checked as it is read)."""
        return self.checked_bounds if self.config.outcome == "return" else None

    @property
    def checked_bounds(self) -> ReturnBounds | None:
        """The bounds every played return must lie in (those of a finite-sample guarantee), else None."""
        return self.bounds if self.guarantee == "finite-sample" else None

    def job(
        self,
        spec: QuantSpec,
        seed: int,
        agent: AgentRef | None = None,
        episodes: int | None = None,
        method: str = "ptq",
        target: DeployTarget | None = None,
    ) -> Job:
        agent = agent or self.ref
        episodes = episodes or self.config.batch
        n_envs = min(self.n_envs, episodes)
        job = Job(
            agent.algo,
            agent.env_id,
            spec,
            agent.content_hash,
            episodes,
            seed,
            n_envs,
            self.actions,
            perturbation=self.config.perturb,
            judge=judge_text(
                self.config.outcome, outcome_rule(self.config.outcome, self.config.success, self.config.progress)
            ),
        )
        return replace(job, method="deploy", target=target) if target is not None else replace(job, method=method)

    def agent_of(self, job: Job) -> AgentRef:
        """The agent that plays ``job``: the baseline's fp32 reference, or this agent."""
        return self.baseline if job.agent_hash == self.baseline.content_hash else self.ref

    def checked(self, row: dict[str, Any], job: Job) -> dict[str, Any]:
        """``row``, once its returns are known to lie in the bounds the guarantee rests on (a row stored by an
        earlier run without them may not).

        :raises QuarlError: in one line, naming the episode and the bounds; no verdict is stored then.
        """
        check_returns(self.checked_bounds, self.values(row), row["episode_ids"], spec_name(job.spec))
        return row

    def values(self, row: dict[str, Any]) -> np.ndarray:
        """Each episode's value of the certified outcome (the return by default), higher is better."""
        return outcome_values(row, self.config.outcome, self.config.success)

    def test(self, alpha: float) -> SequentialTest:
        """The sequential test at one-sided level ``alpha``, on this certification's guarantee and bounds."""
        bounds = (self.bounds.low, self.bounds.high) if self.bounds else None
        return SequentialTest(
            self.guarantee,
            alpha,
            bounds if self.guarantee == "finite-sample" else None,
            planned_pairs=self.config.planned_episodes,
        )

    def scale(self) -> Generator[Need, Rows, Scale]:
        """δ, how it was set, the scale rows it came from and their returns (the fp32 policy's ``batch`` episodes,
        the random policy's ``random_episodes``), and the catastrophe threshold."""
        config = self.config
        empty = np.zeros(0)
        if config.outcome != "return":  # ε is given in the outcome's units; a return loss is no catastrophe of it
            assert config.tolerance_abs is not None  # CertifyConfig asks for it
            what = f"success ({success_rule(config.success)})" if config.outcome == "success" else config.outcome
            return Scale(config.tolerance_abs, f"ε {config.tolerance_abs:g} {what}", (), empty, empty, None, "")
        if config.tolerance_abs is not None and config.catastrophe is not None:
            return Scale(config.tolerance_abs, f"{config.tolerance_abs:g} reward", (), empty, empty, config.catastrophe)
        seed = batch_seed(config.seed, SCALE_STREAM)
        fp32_job = self.job(QuantSpec("fp32"), seed, self.baseline)
        random_job = self.job(FP32, seed, self.baseline, config.random_episodes, method="random")
        rows = yield Need((fp32_job, random_job))
        fp32, random = self.checked(rows[fp32_job.key], fp32_job), self.checked(rows[random_job.key], random_job)
        catastrophe, source = self.catastrophe_threshold(fp32["mean_reward"], random["mean_reward"])
        if config.tolerance_abs is not None:
            delta, text = config.tolerance_abs, f"{config.tolerance_abs:g} reward"
        else:
            try:
                delta = tolerance_delta(config.tolerance, fp32["mean_reward"], random["mean_reward"])
            except ValueError as error:
                raise QuarlError(str(error)) from None
            text = f"{config.tolerance:g}% of (R_fp32 {fp32['mean_reward']:.2f} - R_random {random['mean_reward']:.2f})"
        # δ's sequences read these in identity order, fixed before the episodes were played (statistics/pairing.py)
        returns = (
            in_identity_order(fp32["episode_rewards"], fp32["episode_ids"]),
            in_identity_order(random["episode_rewards"], random["episode_ids"]),
        )
        return Scale(delta, text, (fp32["key"], random["key"]), *returns, catastrophe, source)

    def catastrophe_threshold(self, fp32_reward: float, random_reward: float) -> tuple[float | None, str]:
        """The loss that counts a pair as a catastrophe, and where it comes from: ``--catastrophe``; else half of
        R_fp32 - R_random; where fp32 does not beat random, half the env's known return range; else None (the
        catastrophe rate is not computed, and the mean's verdict stands without it).

        :raises QuarlError: for ``--max-catastrophe-rate`` with no threshold to apply it to.
        """
        config = self.config
        if config.catastrophe is not None:
            return config.catastrophe, "--catastrophe"
        if fp32_reward - random_reward > 0:
            return (fp32_reward - random_reward) / 2, "half of R_fp32 - R_random"
        if self.bounds is not None:
            return (
                self.bounds.high - self.bounds.low
            ) / 2, f"half the return range [{self.bounds.low:g}, {self.bounds.high:g}]"
        if config.max_catastrophe_rate is not None:
            raise QuarlError(
                f"--max-catastrophe-rate {config.max_catastrophe_rate:g} has no threshold to apply to: the fp32 policy "
                f"({fp32_reward:.2f}) does not beat a random one ({random_reward:.2f}) and {self.ref.env_id} has no "
                "known return bounds; pass --catastrophe R (a return loss) or --return-bounds LO HI"
            )
        return None, "not computed: pass --catastrophe R"

    def certify(
        self,
        spec: QuantSpec,
        scale: Scale,
        reference: QuantSpec = FP32,
        equivalence: bool = False,
        families: int = 1,
        target: DeployTarget | None = None,
        by: str = "ptq",
    ) -> Generator[Need, Rows, Verdict]:
        """Batches of paired episodes (``spec``, or ``target``'s artifact, minus the baseline agent's ``reference``,
        fp32 by default) until the
        sequential test decides or ``max_episodes`` is reached: one-sided safe/unsafe, or with ``equivalence`` the
        two-sided equivalent/different. α is split over ``families`` and, for an estimated δ, with δ's bounds."""
        config = self.config
        estimated = config.tolerance_abs is None and len(scale.fp32_returns) > 0
        alpha_test, alpha_delta = split_alpha(config.alpha, families, estimated)
        test = self.test(alpha_test)
        differences: list[np.ndarray] = []
        arms: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])  # each policy's outcome on the pairs played
        fp32_returns = [scale.fp32_returns]
        rows: list[str] = []
        decided, tolerance = None, (scale.delta, scale.delta)  # (δ_low, δ_high): δ itself when it is not estimated
        for number in range(-(-config.max_episodes // config.batch)):
            seed = batch_seed(config.seed, number)
            own_seed = batch_seed(config.seed, UNPAIRED_STREAM + number) if config.unpaired else seed
            reference_job, quantized_job = (
                self.job(reference, seed, self.baseline),
                self.job(spec, own_seed, method=by, target=target),
            )
            fp32_job = self.job(FP32, seed, self.baseline)
            played = yield Need((reference_job, quantized_job), () if reference.is_identity else (fp32_job,))
            fp32 = self.checked(played[reference_job.key], reference_job)
            quantized = self.checked(played[quantized_job.key], quantized_job)
            ours = (self.values(quantized), quantized["episode_ids"], self.values(fp32), fp32["episode_ids"])
            if config.unpaired:
                differences.append(unpaired_differences(*ours))
                q, r = in_identity_order(ours[0], ours[1]), in_identity_order(ours[2], ours[3])
                q, r = q[: len(differences[-1])], r[: len(differences[-1])]
            else:
                q, r = paired_rewards(*ours)
                differences.append(q - r)
            arms[0].append(np.asarray(q, dtype=float))
            arms[1].append(np.asarray(r, dtype=float))
            if reference.is_identity:
                fp32_returns.append(in_identity_order(self.values(fp32), fp32["episode_ids"]))
            elif played.get(fp32_job.key) is not None:  # stored already: δ's bound for free
                row = played[fp32_job.key]
                fp32_returns.append(in_identity_order(row["episode_rewards"], row["episode_ids"]))
            rows += [quantized["key"], fp32["key"]]
            d = np.concatenate(differences)
            if estimated:
                tolerance = tolerance_bounds(
                    config.tolerance, np.concatenate(fp32_returns), scale.random_returns, self.test(alpha_delta)
                )
            crashes = (d < -scale.catastrophe).astype(float) if scale.catastrophe is not None else np.zeros(len(d))
            if equivalence:
                decided = test.equivalence(d, tolerance)
            else:
                decided = test.decide(d, tolerance, crashes, config.max_catastrophe_rate)
            if decided:
                break
        interval = test.interval(d)  # d and crashes: every pair played (the loop runs at least once)
        evidence = {
            "method": "deploy" if target is not None else by,  # what played it, and with what recipe and artifact
            "recipe": spec.recipe_label(),
            "policy_shape": form_of(self.ref).shape(self.ref),  # an action chunk's size and execution, or ''
            "backend": target.backend if target is not None else "",
            "judge": judge_text(config.outcome, outcome_rule(config.outcome, config.success, config.progress)),
            "perturbation": config.perturb,
            "design": "unpaired" if config.unpaired else "paired",
            "outcome": config.outcome,
            "success_rule": success_rule(config.success) if config.outcome == "success" else None,
            "guarantee": self.guarantee,
            "bounds": [self.bounds.low, self.bounds.high] if self.bounds and test.finite else None,
            "bounds_source": self.bounds.source if self.bounds and test.finite else None,
            "alpha_test": alpha_test,
            "alpha_delta": alpha_delta,
            "families": families,
            "delta_low": tolerance[0],
            "delta_high": tolerance[1],
            "catastrophe_threshold": scale.catastrophe,
            "catastrophe_source": scale.catastrophe_source,
            "catastrophes": int(crashes.sum()) if scale.catastrophe is not None else None,
            "nonzero_pairs": int(np.count_nonzero(d)),
            "catastrophe_rate_upper": rate_bound(crashes, alpha_test).upper if scale.catastrophe is not None else None,
            "max_catastrophe_rate": config.max_catastrophe_rate,
            "minimum_episodes": minimum_episodes(scale.delta, test.span, config.alpha) if test.finite else None,
            "min_pairs": None if test.finite else test.min_pairs,
        } | arm_outcomes(config.outcome, np.concatenate(arms[0]), np.concatenate(arms[1]))
        return Verdict(
            spec.precision,
            spec_name(spec),
            decided or "undetermined",
            interval.pairs,
            interval.mean,
            interval.lower,
            interval.upper,
            scale.delta,
            config.alpha,
            tuple(rows),
            evidence=evidence,
        )


def walk_family(spec: QuantSpec) -> str:
    """The ladder a verdict is walked on: :func:`family`, and fp32 alone (certified against a baseline)."""
    return "fp32" if spec.is_identity else family(spec)


def verdict_key(
    ref: AgentRef,
    spec: QuantSpec,
    config: CertifyConfig,
    delta: float,
    reference: QuantSpec | None = None,
    baseline: AgentRef | None = None,
    families: int = 1,
    target: DeployTarget | None = None,
    by: str = "ptq",
) -> str:
    """The stored verdict's key: the agent, the spec's job identity, the certification settings and the δ it was
    decided against (a δ measured again, on other scale rows, is another question); with ``reference``, the spec
    it was compared with (an equivalence test), else fp32; with ``baseline``, the agent whose fp32 it was compared
    with (a hardened agent's parent), else itself; ``families``: how many families the call split α over; ``by``: the
    method that played it (PTQ's keys name none, as before methods were named)."""
    identity = {
        "agent": ref.content_hash,
        "env": ref.env_id,
        "spec": spec_identity(spec, "deploy" if target else by, target),
        "certify": config.identity(),
        "delta": round(delta, 9),
    }
    if reference is not None:
        identity["reference"] = spec_identity(reference)
    if baseline is not None:
        identity["baseline"] = baseline.content_hash
    if families > 1:  # α is split over the call's families: another share is another question
        identity["families"] = families
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
