"""The certified record of a zoo: every agent of a folder certified on one precision ladder, the lowest certified
precision per method, the agents that cannot run here with their reasons, and a diff of two records.

The ladder (:data:`LADDER`): fp16, int8, int6, int5, int4 round-to-nearest per tensor (one walk, widest first), int4
per channel, and W8A8 (int8 weights and activations), each its own family (α shared over the three), at certify's
default tolerance and confidence. Everything goes through certify's driver and store, so a record resumes from its
stored verdicts and two records of the same code and machine are the same.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quarl_bench.errors import QuarlError
from quarl_bench.statistics.wording import spec_name
from quarl_bench.types import AgentRef, QuantSpec

W8A8 = QuantSpec("int8", act_bits="8")
LADDER = (
    QuantSpec("fp16"),
    QuantSpec("int8"),
    QuantSpec("int6"),
    QuantSpec("int5"),
    QuantSpec("int4"),  # granularity auto: per tensor for Linear layers (QuaRL's), per channel for Conv
    QuantSpec("int4", "per-channel"),
    W8A8,
)
METHOD_NAMES = (("RTN per tensor", QuantSpec("int4")), ("int4 per channel", LADDER[5]), ("W8A8", W8A8))


def method_columns() -> dict[str, str]:
    """Each ladder family's label (``statistics.certification.family``) -> the record's column name."""
    from quarl_bench.statistics.certification import family

    return {family(spec): name for name, spec in METHOD_NAMES}


# what certifying one agent's ladder costs, measured on the classic-control record (2026-11-29, 22 agents on two
# workers, 363 s): 2,100 episodes on average (the scale set and every question's pairs; 840 to 3,620 an agent) and
# 14 s of work besides the episodes (loading, quantizing, the fixed states); where the env has no known return
# bounds the asymptotic sequence decides later: 3,000 on the Box2D record (1,120 to 5,200)
PLANNED_EPISODES = 2100
PLANNED_EPISODES_ASYMPTOTIC = 3000
# per env kind where the record measured otherwise: MuJoCo's 16 agents played 24,100 episodes (2026-12-04, a fresh
# record on two workers: 700 to 3,800 an agent, the same 14,140 pairs and 90 verdicts as the first record), where the
# 2,300 taken from the first record's walls (three runs beside other work, 2026-12-02) made a quiet run 0.53x its plan;
# PyBullet's 12 play ~2,250 an agent: their record's 16,000 pairs at the 1.69 episodes a pair that fresh records
# played (ppo's five, 2026-12-04: 7,780 episodes for 4,600 pairs; MuJoCo's 24,100 for 14,140), where the asymptotic
# 3,000 made ppo's five, on a quiet machine, 0.47x their plan
PLANNED_EPISODES_BY_KIND = {"mujoco": 1500, "pybullet": 2250}
# per env where its agents' returns spread so that most questions reach the cap: BipedalWalker's 4 agents, nominal
# and under robot-light (2026-12-03), played 2,845 episodes an agent and condition on the plain walker (a2c decided
# at 100-560 pairs a question, ppo's fp16 and W8A8 at the cap) and 4,320 on Hardcore (every question at the cap),
# where the Box2D average said 3,000: the plan had said 1h09m for the 2h01m that record took on two workers (1h33m now);
# ppo Breakout (2026-12-03, two workers) played 4,640: fp16 safe in 320 pairs, int8, int4 per channel and W8A8 at the
# cap, in 2h15m where the plan had said 1h14m (2h09m now); ppo Pong (2026-12-03 and 04) played 4,420: int5 safe in 680
# pairs, int4 and int4 per channel at the cap, in 3h36m over two runs where the plan had said 1h41m (3h03m now); the
# landers' zoo agents (2026-12-04, fresh stores, two workers) played 2,230 episodes an agent (LunarLander's 4: 700 to
# 2,420 pairs) and 3,430 (the continuous lander's 3: 700 to 3,880 pairs) where the Box2D average said 3,000
PLANNED_EPISODES_BY_ENV = {
    "LunarLander-v3": 2250,
    "LunarLanderContinuous-v3": 3450,
    "BipedalWalker-v3": 2850,
    "BipedalWalkerHardcore-v3": 4300,
    "BreakoutNoFrameskip-v4": 4650,
    "PongNoFrameskip-v4": 4400,
}
RECORD_OVERHEAD_SECONDS = 14.0
# the episodes a record plays per pair its verdicts count (the quantized episode, the fp32 one its families share
# in part, the scale set): 8 classic agents (2026-12-03) took 1,040 pairs each and the wall time of 2,100 episodes
EPISODES_PER_PAIR = 2.0
# what each worker beyond the first adds: the record's own path on 8 classic agents (2026-12-03, quiet machine, 2
# cores; `benchmarks/certify_speed.py --parallel --record`) ran 1.68x faster on a pool of 2 and 1.69x on Ray than in
# one process, where the plan had said 2x (1.15x over its wall): each worker starts torch and loads and quantizes
# each agent again, and two busy cores run each episode slower than one
WORKER_EFFICIENCY = 0.84


def worker_speedup(workers: int) -> float:
    """How many times faster than one process the record runs on ``workers`` (measured for 2; assumed beyond)."""
    return 1.0 if workers <= 1 else workers * WORKER_EFFICIENCY


@dataclass(frozen=True)
class Candidate:
    """One agent folder of the zoo: found (``ref``), or not runnable here (``reason``)."""

    algo: str
    saved_env: str
    ref: AgentRef | None
    reason: str = ""


def zoo_candidates(folder: Path, algos: Sequence[str] = (), envs: Sequence[str] = ()) -> list[Candidate]:
    """Every ``{algo}/{ENV}_{N}`` run folder of an rl-zoo3 log folder (the latest run of each pair), resolved, or
    with the reason it cannot run here (no zip, an env that does not install, an algorithm quarl-bench lacks)."""
    from quarl_bench.zoo.resolve import AgentQuery, resolve

    found = []
    for algo_dir in sorted(p for p in Path(folder).iterdir() if p.is_dir() and not p.name.startswith(".")):
        if algos and algo_dir.name not in algos:
            continue
        saved = sorted(
            {run.name.rsplit("_", 1)[0] for run in algo_dir.iterdir() if run.name.rsplit("_", 1)[-1].isdigit()}
        )
        for env in saved:
            if envs and env not in envs:
                continue
            if not any((run / f"{env}.zip").is_file() for run in algo_dir.glob(f"{env}_*")):
                found.append(Candidate(algo_dir.name, env, None, "no model zip in the folder (configs only)"))
                continue
            try:
                ref = resolve(AgentQuery(env, algo_dir.name, folder=str(folder), use_hub=False))
                _check_env(ref)
                found.append(Candidate(algo_dir.name, env, ref))
            except QuarlError as error:
                found.append(Candidate(algo_dir.name, env, None, str(error)))
            except Exception as error:  # an env package that fails to import or build raises any type
                found.append(Candidate(algo_dir.name, env, None, f"{type(error).__name__}: {str(error)[:160]}"))
    return found


def _check_env(ref: AgentRef) -> None:
    """Build the agent's env once: one that no longer installs is a reason, not a crash mid-record."""
    from quarl_bench.zoo.forms import load_agent

    env = load_agent(ref).make_env(1, 0)
    env.close()


@dataclass(frozen=True)
class PlanContext:
    """What the plan knows besides the agents: ``measured``, this machine's seconds per episode by env (a store's
    rows, ``reproduce.measured_episode_seconds``); ``verdicts``, the store's (what a resumed record reuses); and
    ``perturb``, the suite every agent is also certified under."""

    measured: dict[str, float] = field(default_factory=dict)
    verdicts: pd.DataFrame = field(default_factory=pd.DataFrame)
    perturb: str = ""


def agent_conditions(ref: AgentRef, perturb: str = "") -> list[str]:
    """The conditions an agent's record is certified under: nominal (""), and each of ``perturb``'s its env can play
    (an env that cannot play the suite is certified nominally only)."""
    from quarl_bench.evaluation.perturbations import condition_for, condition_grid

    grid = condition_grid(perturb) if perturb else []  # a name that is not one raises: one line
    with contextlib.suppress(QuarlError):  # a condition this env cannot play: its nominal record stands alone
        return ["", *(condition_for(c, ref.env_id) for c in grid)]
    return [""]


def agent_seconds(candidate: Candidate, context: PlanContext | None = None) -> float:
    """One agent's estimated seconds still to spend (0 for one that cannot run): per condition, the record's
    episodes at this machine's seconds per episode where the context measured its env (else by ``reproduce``'s cost
    model), less the share its stored verdicts already answer."""
    from quarl_bench.api.reproduce import episode_seconds
    from quarl_bench.zoo.return_bounds import return_bounds

    if candidate.ref is None:
        return 0.0
    context = context or PlanContext()
    env = candidate.ref.env_id
    from quarl_bench.api.reproduce import cost_kind

    episodes = PLANNED_EPISODES if return_bounds(env) is not None else PLANNED_EPISODES_ASYMPTOTIC
    episodes = PLANNED_EPISODES_BY_ENV.get(env) or PLANNED_EPISODES_BY_KIND.get(cost_kind(env), episodes)
    conditions = agent_conditions(candidate.ref, context.perturb)
    shares = answered_shares(candidate.ref, context.verdicts, conditions)
    # the agent's own nominal record, once whole, foretells a condition's pairs better than the average does
    # (robot-light took 1.02x its nominal pairs on the classic agents and 0.93x on LunarLander, 2026-12-03, the
    # average 1.30x and 1.68x over), and its own pairs are stored: decided again at a suite's α, they are reused; a
    # nominal record still part-way (a resumed run) plays the rest of its families at the average
    stored = nominal_rows(candidate.ref, context.verdicts)
    whole = not stored.empty and answered_families(stored) == 3
    nominal = EPISODES_PER_PAIR * int(stored["episodes"].sum()) if whole else 0.0
    played = [(nominal if condition else 0.0) if nominal else episodes for condition in conditions]
    seconds = episode_seconds(env, context.measured)
    return sum((RECORD_OVERHEAD_SECONDS + n * seconds) * (1.0 - share) for n, share in zip(played, shares, strict=True))


def nominal_pairs(ref: AgentRef, verdicts: pd.DataFrame) -> int:
    """The pairs the agent's stored nominal ladder took (at the widest α split it was stored with), 0 for none."""
    return int(nominal_rows(ref, verdicts)["episodes"].sum())


def nominal_rows(ref: AgentRef, verdicts: pd.DataFrame) -> pd.DataFrame:
    """The agent's stored nominal ladder verdicts at the widest α split they were stored with (none: empty)."""
    if verdicts.empty:
        return pd.DataFrame({"episodes": []})
    mine = verdicts[
        (verdicts["agent_hash"] == ref.content_hash) & verdicts["spec"].isin([spec_name(s) for s in LADDER])
    ]
    evidence = [e or {} for e in mine["evidence"]]
    nominal = [not e.get("perturbation") for e in evidence]
    families = pd.Series([e.get("families", 0) for e in evidence], index=mine.index)[nominal]
    if families.empty:
        return pd.DataFrame({"episodes": []})
    return mine.loc[families.index[families == families.max()]]


def answered_shares(ref: AgentRef, verdicts: pd.DataFrame, conditions: Sequence[str]) -> list[float]:
    """Per condition, the share of the agent's record already in ``verdicts`` (a store's), with α shared as this
    record shares it: what the plan need not count again."""
    if verdicts.empty:
        return [0.0 for _ in conditions]
    families = 3 * len(conditions)
    mine = verdicts[verdicts["agent_hash"] == ref.content_hash]
    evidence = [e or {} for e in mine["evidence"]]
    shares = []
    for condition in conditions:
        here = [e.get("perturbation", "") == condition and e.get("families") == families for e in evidence]
        shares.append(answered_families(mine.loc[pd.Series(here, index=mine.index, dtype=bool)]) / 3)
    return shares


def answered_families(rows: pd.DataFrame) -> int:
    """How many of the ladder's three families one condition's verdicts answer: the walk once it stopped (a verdict
    that is not safe) or reached its end, int4 per channel and W8A8 once stored."""
    from quarl_bench.statistics.certification import PASSING

    walk = rows[rows["spec"].isin([spec_name(s) for s in LADDER[:5]])]
    answered = int(len(walk) == 5 or bool((~walk["verdict"].isin(PASSING)).any()))
    return answered + sum(int((rows["spec"] == spec_name(s)).any()) for s in LADDER[5:])


def within_budget(
    candidates: Sequence[Candidate], seconds: float | None, workers: int = 1, context: PlanContext | None = None
) -> list[Candidate]:
    """The runnable agents that fit ``seconds`` on ``workers`` processes, in order (an agent that does not fit is
    left out, the next may fit); those that cannot run stay, to be listed."""
    if seconds is None:
        return list(candidates)
    chosen, spent = [], 0.0
    for candidate in candidates:
        cost = agent_seconds(candidate, context) / worker_speedup(workers)
        if candidate.ref is None or spent + cost <= seconds:
            chosen.append(candidate)
            spent += cost
    return chosen


def plan_seconds(
    candidates: Sequence[Candidate], workers: int = 1, context: PlanContext | None = None
) -> tuple[float, dict[str, float]]:
    """The record's estimated seconds on ``workers`` processes (:func:`worker_speedup`), and per env kind on one
    (the plan's cost model)."""
    from quarl_bench.api.reproduce import cost_kind

    per_kind: dict[str, float] = {}
    for candidate in candidates:
        if candidate.ref is not None:
            kind = cost_kind(candidate.ref.env_id)
            per_kind[kind] = per_kind.get(kind, 0.0) + agent_seconds(candidate, context)
    return sum(per_kind.values()) / worker_speedup(workers), per_kind


def record_requests(candidates: Sequence[Candidate], perturb: str = "") -> list[Any]:
    """Per runnable agent, the ladder at certify's defaults on the nominal simulator, and with ``perturb`` (a
    condition, a grid or a named suite) under each of its conditions too, α shared over them all. An agent whose env
    cannot play the suite is certified nominally only."""
    from quarl_bench.api.evaluate import certify_request
    from quarl_bench.certify.config import CertifyConfig
    from quarl_bench.evaluation.perturbations import condition_grid

    if perturb:
        condition_grid(perturb)  # a name or spelling that is not one: one line, before any run
    requests = []
    for candidate in candidates:
        if candidate.ref is None:
            continue
        conditions = agent_conditions(candidate.ref, perturb)
        for condition in conditions:
            config = CertifyConfig(perturb=condition)
            requests.append(certify_request(candidate.ref, LADDER, config, conditions=len(conditions)))
    return requests


def coverage_text(candidates: Sequence[Candidate]) -> str:
    """What the record covers, counted from its candidates (never written by hand): ``63 of 134 folders run here;
    71 cannot: 68 no model zip in the folder (configs only), 3 observations of another env version``."""
    cannot: dict[str, int] = {}
    for candidate in candidates:
        if candidate.ref is None:
            observations = "observations" in candidate.reason and "cannot run on" in candidate.reason
            reason = (
                "saved for another env version whose observations it no longer gives"
                if observations
                else candidate.reason
            )
            cannot[reason] = cannot.get(reason, 0) + 1
    runnable = sum(candidate.ref is not None for candidate in candidates)
    text = f"{runnable} of {len(candidates)} algorithm x env folders run here"
    if cannot:
        text += f"; {len(candidates) - runnable} cannot: " + ", ".join(
            f"{count} {reason}" for reason, count in sorted(cannot.items(), key=lambda item: -item[1])
        )
    return text


def record_table(results: Sequence[Any], store: Any, candidates: Sequence[Candidate]) -> pd.DataFrame:
    """One line per agent: its fp32 score, the minimum certified precision per method, the episodes spent, what
    stayed undetermined; then one line per agent the record could not run, with the reason."""
    lines = []
    for result in results:
        fp32 = store.stored(result.scale_rows[0])["mean_reward"] if result.scale_rows else math.nan
        undetermined = [undetermined_reason(v) for v in result.verdicts if v.verdict == "undetermined"]
        lines.append(
            {
                "algo": result.agent.algo,
                "env": result.agent.env_id,
                "condition": (result.verdicts[0].evidence.get("perturbation") if result.verdicts else "") or "nominal",
                "fp32 score": fp32,
                **{name: _minimum(result, label) for label, name in method_columns().items()},
                "episodes": int(sum(v.episodes for v in result.verdicts)),
                "undetermined": ", ".join(undetermined) or "-",
                "agent": result.agent.content_hash[:12],
                "status": "certified",
            }
        )
    for candidate in candidates:
        if candidate.ref is None:
            lines.append({"algo": candidate.algo, "env": candidate.saved_env, "status": "not run: " + candidate.reason})
    frame = pd.DataFrame(lines)
    frame["episodes"] = [f"{int(v)}" if pd.notna(v) else "-" for v in frame.get("episodes", [math.nan] * len(frame))]
    frame["fp32 score"] = [f"{v:.2f}" if pd.notna(v) else "-" for v in frame.get("fp32 score", [math.nan] * len(frame))]
    return frame.fillna("-")


def undetermined_reason(verdict: Any) -> str:
    """Why an undetermined verdict is one: its pairs and its interval, which still holds the bound that decides (the
    quantized policy may be δ worse, or not: the walk ran to certify's cap first). With an estimated δ, "safe" is
    judged against -δ_low (δ's lower confidence bound), so that is the bound named, e.g. ``fp16 (1000 pairs:
    [-20.41, -9.90] holds -δ_low -20.41)``, with the digits that tell them apart."""
    if math.isnan(verdict.lower):
        return f"{verdict.spec} ({verdict.episodes} pairs: too few for the asymptotic sequence)"
    low = float(verdict.evidence.get("delta_low", verdict.delta))
    digits = 1
    while digits < 6 and round(verdict.lower, digits) == round(-low, digits):
        digits += 1
    number = f"{{:+.{digits}f}}"
    bound = f"-δ_low {number.format(-low)}" if abs(low - verdict.delta) > 1e-12 else number.format(-low)
    return (
        f"{verdict.spec} ({verdict.episodes} pairs: [{number.format(verdict.lower)}, {number.format(verdict.upper)}] "
        f"holds {bound})"
    )


def _minimum(result: Any, label: str) -> str:
    """A family's answer in the record: the certified minimum of a ladder (``int6``, ``≤ int4``, ``> fp16``), or
    the one verdict of a single-precision family (int4 per channel, W8A8: ``safe``, ``unsafe``, ``undetermined``)."""
    walked = [v for v in result.verdicts if result.family_of.get(v.spec) == label]
    if len(walked) == 1:
        return walked[0].verdict
    return str(result.worded_minimums.get(label, "-"))


def run_record(
    requests: Sequence[Any],
    store: Any,
    workers: int = 1,
    on_verdict: Callable[[Any, Any], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    executor_kind: str = "local",
    address: str | None = None,
) -> list[Any]:
    """Certify the record's requests (:func:`record_requests`; resumable: stored verdicts are reused), on
    ``workers`` processes, or on Ray (``executor_kind`` ``ray``: the cluster at ``address``, else a local one)."""
    from quarl_bench.api.evaluate import certify
    from quarl_bench.deploy.machine import kernel_kind
    from quarl_bench.run.executors import make_executor
    from quarl_bench.store.provenance import driver_provenance

    executor = make_executor(executor_kind, store, workers, address=address)
    driver = driver_provenance() | {"cpu_kind": kernel_kind()}  # a diff names the CPU kinds two records ran on
    return certify(list(requests), store, driver, on_verdict, False, executor, on_progress)


def minimum_bits(text: str) -> float:
    """A worded minimum as bits for the figure: ``int5`` 5, ``≤ int4`` 4, ``fp16`` 16, ``> fp16`` 32 (none safe);
    NaN where nothing was decided."""
    import re

    if text.startswith(">"):
        return 32.0
    found = re.search(r"(int|fp)(\d+)", text)
    return float(found.group(2)) if found else math.nan


def draw_record(table: pd.DataFrame, column: str = "RTN per tensor") -> Any:
    """The minimum certified precision of ``column`` by algorithm (rows) and env (columns), in bits (32: not even
    the widest was safe), on the nominal simulator; grey and labelled where even the widest stayed undetermined,
    blank where the record has no agent."""
    import matplotlib.pyplot as plt

    certified = table[table["status"] == "certified"]
    if "condition" in certified:
        certified = certified[certified["condition"] == "nominal"]
    grid = certified.pivot_table(index="algo", columns="env", values=column, aggfunc="first")
    bits = grid.map(lambda v: minimum_bits(str(v)) if isinstance(v, str) else math.nan)
    fig, ax = plt.subplots(figsize=(1.1 * len(bits.columns) + 2, 0.5 * len(bits.index) + 1.5))
    shown = np.ma.masked_invalid(bits.to_numpy(dtype=float))
    image = ax.imshow(shown, cmap="viridis_r", vmin=2, vmax=32, aspect="auto")
    for (row, col), value in np.ndenumerate(bits.to_numpy(dtype=float)):
        label = grid.iloc[row, col]
        if not math.isnan(value):
            ax.text(col, row, str(label), ha="center", va="center", fontsize=7, color="black")
        elif label == "undetermined":  # an agent whose widest precision was not decided: not a missing agent
            ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, color="0.85"))
            ax.text(col, row, "undetermined", ha="center", va="center", fontsize=6, color="black")
    ax.set_xticks(range(len(bits.columns)), list(bits.columns), rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(bits.index)), list(bits.index), fontsize=8)
    ax.set_title(f"minimum certified precision, {column} (bits; 32: none safe)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.03)
    fig.tight_layout()
    return fig
