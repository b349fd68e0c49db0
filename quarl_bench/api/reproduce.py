"""The papers regenerated in one command: every artifact the available agents allow, planned before it runs.

Each artifact is the documented command that makes it (docs/papers.md), so ``reproduce`` plays the very path a
reader would type, resumes where the store stops, and ends with ``report``. The plan says, per artifact, the
published cells, which have an agent here (and where from), which do not and why (with the hub id that would
provide it), what the store already holds, and the time it should take on this machine.

Estimates come from a cost model: seconds per evaluation episode per env kind and seconds per training step per
algorithm, measured on this repository's reference machine (2-core AMD EPYC, one torch thread; the figures, each with
the run it was measured on, are in ``api/episode_costs.py``); where the store holds PTQ rows of an env, their median
seconds per episode replace the model's figure for it; a sweep's total is divided over its workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from quarl_bench.api.episode_costs import (
    AGENT_OVERHEAD_SECONDS,
    ENV_EPISODE_SECONDS,
    EPISODE_SECONDS,
    TRAIN_STEP_SECONDS,
)
from quarl_bench.errors import QuarlError

if TYPE_CHECKING:
    from quarl_bench.store import ResultStore


@dataclass(frozen=True)
class PaperArtifact:
    """One published table or figure and the command that regenerates it.

    :param name: its short name (``--only``).
    :param paper: the paper's name for it.
    :param command: the documented command (without the store and agent-source flags ``reproduce`` adds).
    :param quick: a smoke run of the same path (``--quick``): tiny sizes, seconds to minutes.
    :param grid: the grid whose cells it plays (sweeps), for the plan.
    :param published: the papers' file of its cells (``zoo_configs/paper``), for the plan's counts.
    :param files: the report files it lands in.
    :param fixed_seconds: the estimate of a command the cost model does not cover (full run, quick run): the quick
        ones measured here (2026-11-27: 2.2 s, 25.5 s, 2.1 s, 10.9 s for qat, table4, table5, actorq), the full
        ones from the results of record (Table 4: 30.5 s, Table 5: 1,182 s on a CPU with bf16 arithmetic).
    :param without_bf16: the full run's estimate on a CPU without bf16 arithmetic, where autocast only converts
        (0: the same); Table 5's large bf16 run alone took over 37 minutes on one (docs/papers.md).
    :param without_gpu: the full command and its estimate where torch sees no GPU for a learner (ActorQ: a CPU
        learner of the paper's width makes a few updates a second, so only the cheap DQN rows run: 850 s for their 9
        runs of one seed in the results of record, five seeds now); empty: the same.
    """

    name: str
    paper: str
    command: tuple[str, ...]
    quick: tuple[str, ...]
    grid: str | None = None
    published: str | None = None
    files: str = ""
    fixed_seconds: tuple[float, float] = (0.0, 0.0)
    sources: bool = True  # its sweep takes -f/--cache/--hub (the quick QAT run trains its own agent)
    fixed_from: str = "rough: docs/papers.md"  # where the full run's fixed estimate comes from
    without_bf16: float = 0.0
    without_gpu: tuple[tuple[str, ...], float] | None = None


ARTIFACTS = (
    PaperArtifact(
        "table2",
        "QuaRL Table 2, Figures 2-3, ActorQ appendix Table 4",
        ("sweep", "ptq_table"),
        ("sweep", "ptq_table", "--env", "CartPole-v1", "-n", "5"),
        "ptq_table",
        "quarl_table2.csv",
        "paper_cells.md, reward_error_table.md, weights_*.svg",
    ),
    PaperArtifact(
        "figure7",
        "QuaRL Figure 7 (sweet spot)",
        ("sweep", "sweetspot"),
        ("sweep", "sweetspot", "--env", "CartPole-v1", "-n", "5"),
        "sweetspot",
        None,
        "sweetspot_*.svg, minimum_safe_bits.md",
    ),
    PaperArtifact(
        "qat",
        "QuaRL QAT vs PTQ",
        ("sweep", "qat"),
        ("qat", "--algo", "ppo", "--env", "CartPole-v1", "--bits", "8", "-n", "4096", "--episodes", "5"),
        "qat",
        None,
        "qat_vs_ptq.md, qat_vs_ptq_*.svg",
        (0.0, 10.0),
    ),
    PaperArtifact(
        "table4",
        "QuaRL Table 4 (int8 deployment latency)",
        ("table4",),
        ("table4", "--calls", "20"),
        None,
        "quarl_table4_deployment.csv",
        "table4.md",
        (40.0, 30.0),
        sources=False,
        fixed_from="results of record",
    ),
    PaperArtifact(
        "table5",
        "QuaRL Table 5 (mixed-precision training)",
        ("amp", "--algo", "dqn", "--env", "CartPole", "--seeds", "0", "1", "2"),
        ("amp", "--algo", "dqn", "--env", "CartPole", "--seeds", "0", "--policy-arch", "small", "-n", "2000"),
        None,
        "quarl_table5_mixed_precision.csv",
        "amp_timing.md",
        (1182.0, 10.0),
        sources=False,
        fixed_from="results of record",
        without_bf16=3 * 3600.0,
    ),
    PaperArtifact(
        "actorq",
        "ActorQ Table 2 (speed-ups of fp16/int8 actors)",
        ("actorq", "--grid", "actorq"),
        ("actorq", "--algo", "dqn", "--env", "CartPole-v1", "--n-actors", "1", "--actor-precision", "int8")
        + ("--policy-arch", "64,64", "--max-seconds", "30", "--learning-starts", "200"),
        None,
        "actorq_table2.csv",
        "actorq_speedup.md, actorq_*.svg",
        (7 * 3 * 5 * 900.0, 20.0),  # 5 seeds
        sources=False,
        without_gpu=(("actorq", "--grid", "actorq", "--algo", "dqn"), 5 * 850.0),  # 5 seeds
    ),
)
ARTIFACT_NAMES = tuple(artifact.name for artifact in ARTIFACTS)


@dataclass
class PlanLine:
    """What ``reproduce`` will do for one artifact, before it does it."""

    artifact: PaperArtifact
    command: list[str]
    published_cells: int = 0
    cells_here: int | None = None  # published cells whose agent the sources have (None: not a per-agent table)
    agents: list[str] = field(default_factory=list)  # "algo/env (source)"
    missing: list[str] = field(default_factory=list)  # "algo/env" the sources lack (hub id sb3/algo-env)
    jobs_to_run: int = 0
    already_stored: int = 0
    seconds: float = 0.0
    estimate_from: str = "cost model"  # or "cost model + store" (this machine's rows), "measured run"
    note: str = ""  # what the machine leaves out, and why


def artifact_command(
    artifact: PaperArtifact, quick: bool, store: Path, sources: Any, arguments: tuple[str, ...] = ()
) -> list[str]:
    """The CLI arguments of one artifact's command (or ``arguments``), with the store and (where it takes them) the
    agent sources."""
    arguments = arguments or (artifact.quick if quick else artifact.command)
    command = [*arguments, "--store", str(store)]
    if arguments[0] in ("sweep", "qat", "amp"):  # where trained agents are kept
        command += ["--cache", str(sources.cache)]
    if artifact.sources and arguments[0] == "sweep":
        if sources.folder:
            command += ["-f", str(sources.folder)]
        if sources.use_hub:
            command += ["--hub"]
    return command


def plan_reproduction(
    sources: Any, store: ResultStore, quick: bool = False, only: tuple[str, ...] = (), paper_dir: Path | None = None
) -> list[PlanLine]:
    """One :class:`PlanLine` per artifact (``only``: those named), in the order they run.

    :raises QuarlError: for a name in ``only`` that is no artifact.
    """
    from quarl_bench.config import config_dir
    from quarl_bench.deploy.machine import half_features

    unknown = [name for name in only if name not in ARTIFACT_NAMES]
    if unknown:
        raise QuarlError(f"bad artifact {unknown[0]!r}: expected one of {', '.join(ARTIFACT_NAMES)}")
    paper_dir = paper_dir or config_dir() / "paper"
    measured = measured_episode_seconds(store)
    lines = []
    for artifact in ARTIFACTS:
        if only and artifact.name not in only:
            continue
        line = PlanLine(artifact, artifact_command(artifact, quick, Path(store.path), sources))
        if artifact.published and (paper_dir / artifact.published).is_file():
            line.published_cells = published_cell_count(paper_dir / artifact.published)
        if artifact.grid and (artifact.quick if quick else artifact.command)[0] == "sweep":
            _plan_sweep(line, artifact, quick, sources, store, measured)
            if artifact.published and (paper_dir / artifact.published).is_file():
                line.cells_here = reachable_cells(paper_dir / artifact.published, line.agents)
        else:  # a command the cost model does not cover (and quick QAT: one short training run)
            line.seconds = artifact.fixed_seconds[1 if quick else 0]
            line.estimate_from = "measured run" if quick else artifact.fixed_from
            if not quick and artifact.without_bf16 and not any("bf16" in flag for flag in half_features()):
                line.seconds, line.estimate_from = artifact.without_bf16, "rough: a CPU without bf16 arithmetic"
            if not quick and artifact.without_gpu and not gpu_visible():
                arguments, line.seconds = artifact.without_gpu
                line.command = artifact_command(artifact, quick, Path(store.path), sources, arguments)
                line.estimate_from = "CPU learner: DQN rows (results of record)"
                line.note = CPU_LEARNER_NOTE
            if not quick and artifact.name == "actorq":  # runs side by side where the machine holds several
                side_by_side = actorq_side_by_side()
                if side_by_side > 1:
                    line.seconds /= side_by_side
                    line.estimate_from += f", {side_by_side} runs side by side (actorq --plan)"
        lines.append(line)
    return lines


CPU_LEARNER_NOTE = (
    "torch sees no GPU: the DQN rows only (9 runs x 5 seeds). The paper's 2048x3 learner made 2.6 updates a second on this "
    "repository's 2-core CPU, 363 in a 138 s CartPole run where rl-zoo3 learns it in ~24,500 (of batch 64): every "
    "run is learner-bound, so its actor steps/s are measured and its time to reward is not; D4PG's DMC rows (30 "
    "runs a seed, of up to 350,000 steps per actor) need a GPU learner (--learner-device cuda)"
)


def actorq_side_by_side() -> int:
    """How many of the ActorQ grid's runs this machine holds at once (``actorq/plan.py``)."""
    from quarl_bench.actorq.config import load_actorq_grid
    from quarl_bench.actorq.plan import plan_runs
    from quarl_bench.config import config_dir

    return plan_runs(load_actorq_grid(config_dir() / "actorq.yaml")).side_by_side


def gpu_visible() -> bool:
    """Whether torch sees a GPU (for a learner)."""
    import torch

    return torch.cuda.is_available()


def published_cell_count(path: Path) -> int:
    """The published numbers of a paper file: reward cells for reward tables; for ActorQ Table 2, fp32's time to
    target and the speed-ups (3 a task, as its page counts them); rows otherwise."""
    frame = pd.read_csv(path)
    rewards = [c for c in frame.columns if c.endswith("_reward")]
    if rewards:
        return int(frame[rewards].notna().sum().sum())
    timed = [c for c in frame.columns if c == "fp32_time_s" or c.endswith("_speedup")]
    return int(frame[timed].notna().sum().sum()) if timed else len(frame)


def reachable_cells(path: Path, agents: list[str]) -> int:
    """The published reward cells of a paper file whose agent the plan found (``agents``: "algo/env (source)")."""
    from quarl_bench.config import alias_env_id

    here = {label.split(" ")[0] for label in agents}
    frame = pd.read_csv(path)
    rewards = [c for c in frame.columns if c.endswith("_reward")]
    found = frame[
        [f"{algo}/{alias_env_id(str(env))}" in here for algo, env in zip(frame["algo"], frame["env"], strict=True)]
    ]
    return int(found[rewards].notna().sum().sum()) if rewards else 0


def _plan_sweep(
    line: PlanLine, artifact: PaperArtifact, quick: bool, sources: Any, store: ResultStore, measured: dict
) -> None:
    from quarl_bench.api.sweep import plan_sweep
    from quarl_bench.methods.protocol import handler
    from quarl_bench.run.executors import default_workers
    from quarl_bench.run.runner import known_jobs

    arguments = artifact.quick if quick else artifact.command
    envs = [arguments[arguments.index("--env") + 1]] if "--env" in arguments else None
    episodes = int(arguments[arguments.index("-n") + 1]) if "-n" in arguments else None
    assert artifact.grid is not None  # a sweep's artifact names its grid (the caller checked)
    planned = plan_sweep(artifact.grid, sources, store, envs=envs, episodes=episodes, workers=1)
    line.already_stored = planned.already_stored
    line.missing = [f"{skip.algo}/{skip.env_id}" for skip in planned.skipped]
    seen: set[str] = set()
    longest = 0.0
    for work in planned.works:
        label = f"{work.algo}/{work.env_id}"
        config = work.config
        ref = getattr(config, "ref", None)
        if ref is not None and label not in seen:
            seen.add(label)
            line.agents.append(f"{label} ({ref.source})")
        per_episode = episode_seconds(work.env_id, measured)
        if ref is None:  # a training work (QAT): its steps unless an earlier run cached its agent, then its jobs
            if label not in seen:
                seen.add(label)
                line.agents.append(f"{label} (trained here)")
            known = known_jobs(work)
            pending = [job for job in known if not store.has(job.key)]
            line.already_stored += len(known) - len(pending)
            if not known:
                line.seconds += _training_seconds(work.algo, work.env_id, getattr(config, "n_timesteps", None))
            if pending or not known:
                line.seconds += work.settings.episodes * per_episode
                line.jobs_to_run += 1
            continue
        line.jobs_to_run += len([job for job in handler(config).jobs(work, ref) if not store.has(job.key)])
        seconds = work_seconds(work, store, measured)
        longest, line.seconds = max(longest, seconds), line.seconds + seconds
    missing = {(skip.algo, skip.env_id) for skip in planned.skipped}
    for cell in planned.cells:  # agents whose every job is stored have no work left, but they are here
        label = f"{cell.algo}/{cell.env_id}"
        if (cell.algo, cell.env_id) not in missing and label not in seen:
            seen.add(label)
            line.agents.append(f"{label} (stored)")
    # the sweep deals its works over the cores: the wall time is about the serial time over the workers it uses, but
    # never less than its longest work (one worker plays all 300 games of an Atari cell)
    line.seconds = max(line.seconds / max(1, min(default_workers(), len(planned.works))), longest)
    if any(env in measured for env in {work.env_id for work in planned.works}):
        line.estimate_from = "cost model + store"


def work_seconds(work: Any, store: ResultStore, measured: dict[str, float]) -> float:
    """An evaluation work's estimated seconds by the cost model: its agent's overhead and its jobs not yet stored,
    episode by episode at the env's rate (this store's own where it has rows of the env). A sweep's progress weighs
    its works by this, so its ETA counts time, not works (100 Breakout games are not one CartPole job)."""
    from quarl_bench.methods.protocol import handler

    ref = getattr(work.config, "ref", None)
    per_episode = episode_seconds(work.env_id, measured)
    if ref is None:  # a training work: its evaluation episodes (its training is planned apart)
        return work.settings.episodes * per_episode
    # a job in ``skip`` is another work's (the fp32 reference a cell's first share plays): not this work's time
    jobs = [job for job in handler(work.config).jobs(work, ref) if job.key not in work.skip and not store.has(job.key)]
    return AGENT_OVERHEAD_SECONDS + sum(job.episodes for job in jobs) * per_episode


def episode_seconds(env_id: str, measured: dict[str, float] | None = None) -> float:
    """The cost model's seconds per episode of ``env_id``: this store's rows where ``measured`` has the env, else
    :data:`ENV_EPISODE_SECONDS`, else :data:`EPISODE_SECONDS` by env kind."""
    return (measured or {}).get(env_id) or ENV_EPISODE_SECONDS.get(env_id) or EPISODE_SECONDS[cost_kind(env_id)]


BOX2D = ("LunarLander", "BipedalWalker", "CarRacing")
MUJOCO = ("HalfCheetah-", "Hopper-", "Walker2d-", "Ant-", "Humanoid", "Swimmer-", "Reacher-", "InvertedPendulum-")


def cost_kind(env_id: str) -> str:
    """The row of :data:`EPISODE_SECONDS` an env's episodes cost."""
    from quarl_bench.zoo.envs import env_kind
    from quarl_bench.zoo.ids import DMC_PREFIX

    if env_id.startswith(DMC_PREFIX):
        return "dmc"
    try:
        kind = env_kind(env_id)
    except Exception:  # noqa: BLE001 - an env whose package is missing: priced as "other"
        return "other"
    if kind in ("atari", "bullet"):
        return "atari" if kind == "atari" else "pybullet"
    if env_id.startswith(BOX2D):
        return "box2d"
    return "mujoco" if env_id.startswith(MUJOCO) else "classic"


def _training_seconds(algo: str, env_id: str, n_timesteps: int | None) -> float:
    from quarl_bench.config import zoo_hyperparameters

    steps = n_timesteps
    if steps is None:
        try:
            steps = int(float(zoo_hyperparameters(algo, env_id).get("n_timesteps", 1e5)))
        except QuarlError:
            steps = 100_000
    return steps * TRAIN_STEP_SECONDS.get(algo, 0.001)


def measured_episode_seconds(store: ResultStore) -> dict[str, float]:
    """Seconds per episode this store's PTQ rows took, per env (the median over rows): this machine's figure."""
    frame = store.to_dataframe()
    if frame.empty:
        return {}
    rows = frame[(frame["method"] == "ptq") & (frame["episodes"] > 0)]
    if rows.empty:
        return {}
    per_episode = rows["wall_seconds"] / rows["episodes"]
    return {env: float(value) for env, value in per_episode.groupby(rows["env_id"]).median().items()}


def within_budget(lines: list[PlanLine], budget_seconds: float | None) -> tuple[list[PlanLine], list[PlanLine]]:
    """The artifacts that fit ``budget_seconds`` in order (an artifact that does not fit is left out, the next
    smaller ones still tried), and those left out."""
    if budget_seconds is None:
        return lines, []
    chosen, left, spent = [], [], 0.0
    for line in lines:
        if spent + line.seconds <= budget_seconds:
            chosen.append(line)
            spent += line.seconds
        else:
            left.append(line)
    return chosen, left


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``2h`` or ``1h30m`` as seconds.

    :raises QuarlError: for anything else.
    """
    import re

    match = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise QuarlError(f"bad budget {text!r}: expected a duration such as 90s, 30m, 2h or 1h30m")
    hours, minutes, seconds = (float(group or 0) for group in match.groups())
    return hours * 3600 + minutes * 60 + seconds
