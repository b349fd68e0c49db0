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
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from quarl_bench.errors import QuarlError
from quarl_bench.methods.certification_result import Verdict
from quarl_bench.methods.certify_config import CertifyConfig
from quarl_bench.methods.protocol import OfAgent, SideRow, register
from quarl_bench.methods.verdict_rows import verdict_row
from quarl_bench.statistics.certification import (
    SequentialTest,
    family,
    minimum_episodes,
    rate_bound,
    split_alpha,
    tolerance_bounds,
    tolerance_delta,
)
from quarl_bench.statistics.pairing import paired_rewards
from quarl_bench.types import AgentRef, Job, QuantSpec
from quarl_bench.zoo.return_bounds import return_bounds

if TYPE_CHECKING:
    from quarl_bench.work import Work

FP32 = QuantSpec("fp32")
SCALE_STREAM = 2**31  # batch_seed's stream for the scale set (δ's fp32 and random episodes)


@dataclass(frozen=True)
class Scale:
    """What the scale set says: δ (point estimate), its wording, the scale rows' keys, both policies' returns and
    the catastrophe threshold."""

    delta: float
    text: str
    rows: tuple[str, ...]
    fp32_returns: np.ndarray
    random_returns: np.ndarray
    catastrophe: float


def batch_seed(seed: int, batch: int) -> int:
    """The evaluation seed of batch ``batch`` of a certification seeded ``seed``: batch 0 is ``seed`` itself, later
    batches a hash of both, so two seed bases never share a batch."""
    if batch == 0:
        return seed
    return int(np.random.SeedSequence([seed, batch]).generate_state(1)[0] >> 1)


def spec_name(spec: QuantSpec) -> str:
    """How a verdict names its precision: the precision, with its grid and recipe where they differ from plain RTN."""
    parts = ["/".join(spec.layer_precisions) if spec.layer_precisions else spec.precision]
    if spec.number_format.is_int and spec.granularity != "auto":
        parts.append(spec.granularity)
    if spec.symmetric:
        parts.append("symmetric")
    if spec.recipe_label():
        parts.append(spec.recipe_label())
    return " ".join(parts)


def widest_first(specs: tuple[QuantSpec, ...], keep_fp32: bool = False) -> list[QuantSpec]:
    """Families in the order their widest spec comes, each family widest first; fp32 only with ``keep_fp32`` (a
    certification against a baseline agent), first, alone in its family."""
    kept = (s for s in specs if keep_fp32 or not s.is_identity)
    ordered = sorted(dict.fromkeys(kept), key=lambda s: (not s.is_identity, -s.bits, spec_name(s)))
    families = list(dict.fromkeys(walk_family(s) for s in ordered))
    return sorted(ordered, key=lambda s: families.index(walk_family(s)))


class Certifier:
    """Runs the batches of one agent: loads it once, evaluates only the jobs the store lacks.

    :param baseline: the agent whose fp32 episodes the differences are taken against, and whose rewards set δ (a
        hardened agent's parent); None: the agent itself. Both play the same seeded episodes, paired one to one.
    :raises QuarlError: for a finite-sample guarantee asked on an env with no known return bounds.
    """

    def __init__(
        self, ref: AgentRef, config: CertifyConfig, store: Any, driver: dict[str, Any], baseline: AgentRef | None = None
    ) -> None:
        from quarl_bench.registry import action_mode
        from quarl_bench.zoo.envs import default_eval_envs

        self.ref, self.config, self.store, self.driver = ref, config, store, driver
        self.baseline = baseline or ref
        if self.baseline.env_id != ref.env_id:
            raise QuarlError(
                f"bad baseline {self.baseline.algo}/{self.baseline.env_id}: expected an agent on {ref.env_id}, "
                "whose episodes pair with this agent's"
            )
        self.bounds = return_bounds(ref.env_id, config.return_bounds)
        self.guarantee = config.guarantee or ("finite-sample" if self.bounds else "asymptotic")
        if self.guarantee == "finite-sample" and self.bounds is None:
            raise QuarlError(
                f"no known return bounds for {ref.env_id}: a finite-sample guarantee needs --return-bounds LO HI "
                "(every episode's return in [LO, HI]), or pass --guarantee asymptotic"
            )
        self.n_envs = min(config.n_envs or default_eval_envs(ref.env_id), config.batch)
        self.actions = action_mode(ref)
        self._agents: dict[str, Any] = {}

    def job(self, spec: QuantSpec, seed: int, agent: AgentRef | None = None, episodes: int | None = None) -> Job:
        agent = agent or self.ref
        episodes = episodes or self.config.batch
        return Job(
            agent.algo, agent.env_id, spec, agent.content_hash, episodes, seed, min(self.n_envs, episodes), self.actions
        )

    def row(self, job: Job) -> dict[str, Any]:
        """The job's stored row, evaluated and stored first if the store lacks it.

        :raises QuarlError: for an episode whose return lies outside the return bounds (no verdict is stored).
        """
        from quarl_bench.methods.ptq import evaluator
        from quarl_bench.zoo.agents import load_agent

        row = self.store.get(job.key)
        if row is None:
            if job.agent_hash not in self._agents:
                ref = self.baseline if job.agent_hash == self.baseline.content_hash else self.ref
                self._agents[job.agent_hash] = load_agent(ref)
            result = evaluator(job.spec.method)(self._agents[job.agent_hash], job, self.driver)
            self.check_bounds(result.episode_rewards, result.episode_ids, job)  # before anything is stored
            self.store.put(result)
            row = self.store.get(job.key)
        self.check_bounds(row["episode_rewards"], row["episode_ids"], job)
        return row

    def check_bounds(self, rewards: Any, identities: Any, job: Job) -> None:
        """Stop with one line when an episode's return lies outside the bounds the guarantee rests on."""
        if self.bounds is None or self.guarantee != "finite-sample":
            return
        for reward, identity in zip(rewards, identities, strict=False):
            if not self.bounds.low <= reward <= self.bounds.high:
                raise QuarlError(
                    f"episode {list(identity)} (env, episode, reset seed) of {spec_name(job.spec)} returned "
                    f"{reward:g}, outside the return bounds [{self.bounds.low:g}, {self.bounds.high:g}] "
                    f"({self.bounds.source}): no verdict stored; pass --return-bounds LO HI that hold for every "
                    "episode, or --guarantee asymptotic"
                )

    def test(self, alpha: float) -> SequentialTest:
        """The sequential test at one-sided level ``alpha``, on this certification's guarantee and bounds."""
        bounds = (self.bounds.low, self.bounds.high) if self.bounds else None
        return SequentialTest(
            self.guarantee,
            alpha,
            bounds if self.guarantee == "finite-sample" else None,
            planned_pairs=self.config.planned_episodes,
        )

    def scale(self) -> Scale:
        """δ, how it was set, the scale rows it came from and their returns (the fp32 policy's ``batch`` episodes,
        the random policy's ``random_episodes``), and the catastrophe threshold."""
        config = self.config
        if config.tolerance_abs is not None and config.catastrophe is not None:
            empty = np.zeros(0)
            return Scale(config.tolerance_abs, f"{config.tolerance_abs:g} reward", (), empty, empty, config.catastrophe)
        seed = batch_seed(config.seed, SCALE_STREAM)
        fp32 = self.row(self.job(QuantSpec("fp32"), seed, self.baseline))
        random = self.row(self.job(QuantSpec("fp32", method="random"), seed, self.baseline, config.random_episodes))
        span = fp32["mean_reward"] - random["mean_reward"]
        catastrophe = config.catastrophe if config.catastrophe is not None else span / 2
        if not catastrophe > 0:
            raise QuarlError(
                f"the fp32 policy ({fp32['mean_reward']:.2f}) does not beat a random one "
                f"({random['mean_reward']:.2f}): no default catastrophe threshold, pass --catastrophe R"
            )
        if config.tolerance_abs is not None:
            delta, text = config.tolerance_abs, f"{config.tolerance_abs:g} reward"
        else:
            try:
                delta = tolerance_delta(config.tolerance, fp32["mean_reward"], random["mean_reward"])
            except ValueError as error:
                raise QuarlError(str(error)) from None
            text = f"{config.tolerance:g}% of (R_fp32 {fp32['mean_reward']:.2f} - R_random {random['mean_reward']:.2f})"
        returns = (np.asarray(fp32["episode_rewards"], float), np.asarray(random["episode_rewards"], float))
        return Scale(delta, text, (fp32["key"], random["key"]), *returns, catastrophe)

    def certify(
        self,
        spec: QuantSpec,
        scale: Scale,
        reference: QuantSpec = FP32,
        equivalence: bool = False,
        families: int = 1,
    ) -> Verdict:
        """Batches of paired episodes (``spec`` minus the baseline agent's ``reference``, fp32 by default) until the
        sequential test decides or ``max_episodes`` is reached: one-sided safe/unsafe, or with ``equivalence`` the
        two-sided equivalent/different. α is split over ``families`` and, for an estimated δ, with δ's bounds."""
        config = self.config
        estimated = config.tolerance_abs is None and len(scale.fp32_returns) > 0
        alpha_test, alpha_delta = split_alpha(config.alpha, families, estimated)
        test = self.test(alpha_test)
        differences: list[np.ndarray] = []
        fp32_returns = [scale.fp32_returns]
        rows: list[str] = []
        decided, tolerance = None, (scale.delta, scale.delta)  # (δ_low, δ_high): δ itself when it is not estimated
        for number in range(-(-config.max_episodes // config.batch)):
            seed = batch_seed(config.seed, number)
            fp32 = self.row(self.job(reference, seed, self.baseline))
            quantized = self.row(self.job(spec, seed))
            q, r = paired_rewards(
                quantized["episode_rewards"], quantized["episode_ids"], fp32["episode_rewards"], fp32["episode_ids"]
            )
            differences.append(q - r)
            if reference.is_identity:
                fp32_returns.append(r)
            elif (played := self.store.get(self.job(FP32, seed, self.baseline).key)) is not None:
                fp32_returns.append(np.asarray(played["episode_rewards"], float))  # stored already: δ's bound for free
            rows += [quantized["key"], fp32["key"]]
            d = np.concatenate(differences)
            if estimated:
                tolerance = tolerance_bounds(
                    config.tolerance, np.concatenate(fp32_returns), scale.random_returns, self.test(alpha_delta)
                )
            crashes = (d < -scale.catastrophe).astype(float)
            if equivalence:
                decided = test.equivalence(d, tolerance)
            else:
                decided = test.decide(d, tolerance, crashes, config.max_catastrophe_rate)
            if decided:
                break
        interval = test.interval(d)  # d and crashes: every pair played (the loop runs at least once)
        evidence = {
            "guarantee": self.guarantee,
            "bounds": [self.bounds.low, self.bounds.high] if self.bounds and test.finite else None,
            "bounds_source": self.bounds.source if self.bounds and test.finite else None,
            "alpha_test": alpha_test,
            "alpha_delta": alpha_delta,
            "families": families,
            "delta_low": tolerance[0],
            "delta_high": tolerance[1],
            "catastrophe_threshold": scale.catastrophe,
            "catastrophes": int(crashes.sum()),
            "nonzero_pairs": int(np.count_nonzero(d)),
            "catastrophe_rate_upper": rate_bound(crashes, alpha_test).upper,
            "max_catastrophe_rate": config.max_catastrophe_rate,
            "minimum_episodes": minimum_episodes(scale.delta, test.span, config.alpha) if test.finite else None,
            "min_pairs": None if test.finite else test.min_pairs,
        }
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


def verdict_key(
    ref: AgentRef,
    spec: QuantSpec,
    config: CertifyConfig,
    delta: float,
    reference: QuantSpec | None = None,
    baseline: AgentRef | None = None,
    families: int = 1,
) -> str:
    """The stored verdict's key: the agent, the spec's job identity, the certification settings and the δ it was
    decided against (a δ measured again, on other scale rows, is another question); with ``reference``, the spec
    it was compared with (an equivalence test), else fp32; with ``baseline``, the agent whose fp32 it was compared
    with (a hardened agent's parent), else itself; ``families``: how many families the call split α over."""
    identity = {
        "agent": ref.content_hash,
        "env": ref.env_id,
        "spec": Job(ref.algo, ref.env_id, spec, ref.content_hash).identity()["spec"],
        "certify": config.identity(),
        "delta": round(delta, 9),
    }
    if reference is not None:
        identity["reference"] = Job(ref.algo, ref.env_id, reference, ref.content_hash).identity()["spec"]
    if baseline is not None:
        identity["baseline"] = baseline.content_hash
    if families > 1:  # α is split over the call's families: another share is another question
        identity["families"] = families
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class CertificationConfig(OfAgent):
    """The certification of one agent's specs (method ``certify``): ``settings`` say how, ``specs`` what, and
    ``baseline`` against whose fp32 (a hardened agent's parent; None: the agent's own). Against a baseline, fp32
    itself is a spec too: the agent's own fp32 is certified not worse than the baseline's."""

    specs: tuple[QuantSpec, ...]
    settings: CertifyConfig = field(default_factory=CertifyConfig)
    baseline: AgentRef | None = None
    method: ClassVar[str] = "certify"


def walk_family(spec: QuantSpec) -> str:
    """The ladder a verdict is walked on: :func:`family`, and fp32 alone (certified against a baseline)."""
    return "fp32" if spec.is_identity else family(spec)


def count_families(specs: Any) -> int:
    """How many families one certify call walks (its α is split over them)."""
    return len({walk_family(s) for s in specs})


@dataclass(frozen=True)
class VerdictJob:
    """One spec's verdict to decide; its key holds the δ it is decided against."""

    spec: QuantSpec
    key: str


@register(CertificationConfig)
class CertifyHandler:
    """Certification as a method: its jobs are the specs' verdicts, widest first (δ is measured first, on the scale
    rows, since every verdict's key holds it); ``produce`` walks them and stops a family at its first width that is
    not safe, so a run may leave later jobs unproduced (``sequential``). With ``every_width`` the walk goes on, and
    the verdicts after the first that is not safe are marked exploratory: the fixed-sequence argument that bounds a
    family's wrong "safe" verdicts by α covers a walk only up to its first stop. α is split over the families of one
    call (Bonferroni). Batches are ordinary PTQ rows of the work's store, stored as they are played: an interrupted
    certification resumes."""

    remote = False
    table = "verdicts"
    sequential = True
    KEPT = 4  # certifiers kept (each holds a loaded agent): ``mixed`` certifies one allocation per call

    def __init__(self) -> None:
        self.certifiers: dict[tuple, tuple[Certifier, Scale]] = {}

    def certifier(self, work: Work) -> tuple[Certifier, Scale]:
        """The agent's certifier (one per agent, settings and store) and its scale set (δ, its wording, rows)."""
        config = work.config
        # the store object itself is part of the key (and kept by the certifier): another store, even at the same
        # path, gets a certifier of its own
        who = (config.ref, config.settings, config.baseline, id(work.store), str(work.store.path))
        if who not in self.certifiers:
            while len(self.certifiers) >= self.KEPT:
                self.certifiers.pop(next(iter(self.certifiers)))
            certifier = Certifier(config.ref, config.settings, work.store, work.driver, config.baseline)
            self.certifiers[who] = (certifier, certifier.scale())
        return self.certifiers[who]

    def agent(self, work: Work) -> AgentRef:
        return work.config.ref

    def jobs(self, work: Work, agent: AgentRef | None) -> list[VerdictJob]:
        config = work.config
        delta = self.certifier(work)[1].delta
        specs = widest_first(config.specs, keep_fp32=config.baseline is not None)
        families = count_families(specs)
        return [
            VerdictJob(
                s, verdict_key(config.ref, s, config.settings, delta, baseline=config.baseline, families=families)
            )
            for s in specs
        ]

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[VerdictJob]) -> Iterator[SideRow]:
        config = work.config
        certifier, scale = self.certifier(work)
        pending = {job.key for job in jobs}
        ordered = self.jobs(work, agent)
        families = count_families(job.spec for job in ordered)
        stopped: set[str] = set()  # families whose walk ended at a precision that is not safe
        for job in ordered:
            walk = walk_family(job.spec)
            if walk in stopped and not config.settings.every_width:
                continue
            if job.key in pending:
                found = replace(certifier.certify(job.spec, scale, families=families), key=job.key)
                if walk in stopped:
                    found = replace(found, evidence=found.evidence | {"exploratory": True})
                row = verdict_row(
                    found, config.ref, job.spec, config.settings, scale.text, work.driver, config.baseline
                )
                yield SideRow("verdicts", row)
                decided = found.verdict
            else:  # stored before: it decides the walk as it did then
                stored = certifier.store.get_verdict(job.key)
                decided = stored["verdict"] if stored else "undetermined"
            if decided != "safe":
                stopped.add(walk)
