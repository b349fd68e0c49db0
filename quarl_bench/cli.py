"""``quarl-bench`` command line: parse arguments, call the runner, print. No logic of its own."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table

from quarl_bench.config import config_dir
from quarl_bench.errors import QuarlError
from quarl_bench.types import ALGOS, GRANULARITIES, PRECISION_HELP, AgentRef, QuantSpec, parse_precision

# Pipes and CI logs get 80 columns by default, which wraps every row of the result table.
console = Console(width=None if sys.stdout.isatty() else 120)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        print(f"quarl-bench: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def precision_arg(value: str) -> str:
    try:
        return parse_precision(value)
    except QuarlError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="quarl-bench", description="What does quantization do to RL policies?")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = commands.add_parser("run", help="post-training quantize an agent and evaluate it against fp32")
    add_agent_args(run)
    run.add_argument(
        "--bits",
        nargs="+",
        type=precision_arg,
        default=["int8"],
        metavar="P",
        help=f"precision(s): {PRECISION_HELP}; 32 is the unquantized policy (default 8)",
    )
    run.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        default="auto",
        help="auto: per-tensor Linear, per-output-channel Conv (QuaRL's choice)",
    )
    run.add_argument("--symmetric", action="store_true", help="symmetric narrow-range grid instead of QuaRL's")
    run.add_argument("--quantize-bias", action="store_true", help="quantize biases too (QuaRL kept them fp32)")
    run.add_argument("-n", "--episodes", type=positive_int, default=100, help="episodes per precision (default 100)")
    run.add_argument("--n-envs", type=positive_int, default=None, help="envs evaluated at once (default per env kind)")
    run.add_argument("--store", type=Path, default=None, help="results database (default results/quarl.sqlite)")
    run.add_argument("--force", action="store_true", help="re-run jobs already in the store")

    sweep = commands.add_parser("sweep", help="run a YAML job grid (zoo_configs/*.yaml), resuming where it stopped")
    sweep.add_argument("grid", type=Path, help="grid file, e.g. zoo_configs/sweetspot.yaml")
    sweep.add_argument("--algo", nargs="+", type=str.lower, default=None, help="only these algos")
    sweep.add_argument("--env", nargs="+", default=None, help="only these envs (ids or aliases)")
    sweep.add_argument("--bits", nargs="+", type=precision_arg, default=None, metavar="P", help="only these precisions")
    sweep.add_argument("-n", "--episodes", type=positive_int, default=None, help="override the grid's episodes")
    sweep.add_argument("--folder", type=Path, default=None, help="rl-zoo3 log folder to take agents from ($QUARL_ZOO)")
    sweep.add_argument("--cache", type=Path, default=None, help="agent cache (default results/agents)")
    sweep.add_argument("--hub", action="store_true", help="also try the Hugging Face hub for missing agents")
    sweep.add_argument("--train-if-missing", action="store_true", help="train missing fp32 baselines with rl-zoo3")
    sweep.add_argument("--workers", type=positive_int, default=None, help="parallel processes (default: the cores)")
    sweep.add_argument("--executor", choices=("local", "ray"), default="local", help="process pool, or a Ray cluster")
    sweep.add_argument("--address", default=None, help="Ray cluster address (default: start a local cluster)")
    sweep.add_argument("--store", type=Path, default=None, help="results database (default results/quarl.sqlite)")
    sweep.add_argument("--force", action="store_true", help="re-run jobs already in the store")

    qat = commands.add_parser("qat", help="quantization-aware training with rl-zoo3 hyperparameters, then evaluation")
    qat.add_argument(
        "--algo", required=True, type=str.lower, choices=ALGOS, metavar="ALGO", help=f"one of {', '.join(ALGOS)}"
    )
    qat.add_argument("--env", required=True, help="env id or alias")
    qat.add_argument("--bits", required=True, type=precision_arg, metavar="P", help="2-8 or 16 (or fp16, bf16)")
    qat.add_argument("--quant-delay", type=positive_int, default=None, help="steps before quantization (default: half)")
    qat.add_argument("-n", "--n-timesteps", type=positive_int, default=None, help="training steps (default: rl-zoo3's)")
    qat.add_argument("--seed", type=int, default=0, help="training seed")
    qat.add_argument("--quantize-activations", action="store_true", help="also fake-quantize layer outputs")
    qat.add_argument("--episodes", type=positive_int, default=100, help="evaluation episodes (default 100)")
    qat.add_argument("--eval-seed", type=int, default=0, help="evaluation seed")
    qat.add_argument("--cache", type=Path, default=None, help="agent cache (default results/agents)")
    qat.add_argument("--store", type=Path, default=None, help="results database (default results/quarl.sqlite)")

    amp = commands.add_parser("amp", help="mixed-precision training timing: fp32 vs autocast for three policy sizes")
    amp.add_argument("--algo", default="dqn", type=str.lower, choices=ALGOS, metavar="ALGO", help="default dqn")
    amp.add_argument("--env", default="CartPole-v1", help="env id or alias (default CartPole-v1)")
    amp.add_argument(
        "--policy-arch", nargs="+", choices=("small", "medium", "large"), default=["small", "medium", "large"]
    )
    amp.add_argument(
        "--dtype",
        default="bf16" if not torch_cuda() else "fp16",
        choices=("bf16", "fp16"),
        help="autocast type (bf16 on CPU)",
    )
    amp.add_argument("-n", "--n-timesteps", type=positive_int, default=20_000, help="training steps per run")
    amp.add_argument("--seed", type=int, default=0)
    amp.add_argument("--episodes", type=positive_int, default=20, help="evaluation episodes of each trained agent")
    amp.add_argument("--cache", type=Path, default=None, help="agent cache (default results/agents)")
    amp.add_argument("--store", type=Path, default=None, help="results database (default results/quarl.sqlite)")

    actorq = commands.add_parser(
        "actorq", help="ActorQ: fp32 learner, quantized actors on Ray; speed and reward",
        description="One run from the flags, or every run of --grid (flags given override its settings). "
        "Defaults: dqn, CartPole-v1, int8 actors, 2 actors, 2048,2048,2048.",
    )  # fmt: skip
    actorq.add_argument("--grid", type=Path, default=None, help="study file, e.g. zoo_configs/actorq.yaml")
    actorq.add_argument("--algo", default=None, choices=("dqn", "td3", "ddpg"),
                        help="learner: dqn (discrete actions) or td3/ddpg (continuous)")  # fmt: skip
    actorq.add_argument("--env", default=None, help="env id or alias (default CartPole-v1)")
    actorq.add_argument("--actor-precision", default=None, choices=("fp32", "fp16", "int8"))
    actorq.add_argument("--int8-backend", default=None, choices=("onnxruntime", "torch"),
                        help="int8 actor kernels (default onnxruntime: the faster one here)")  # fmt: skip
    actorq.add_argument("--comm-bits", type=int, default=None, help="bits per broadcast weight: 32, 16 or 2-8")
    actorq.add_argument("--n-actors", type=positive_int, default=None)
    actorq.add_argument("--policy-arch", type=widths, default=None,
                        help="hidden widths, comma-separated (default 2048,2048,2048)")  # fmt: skip
    actorq.add_argument("--pull-period", type=positive_int, default=None, help="actor steps between weight pulls")
    actorq.add_argument("--samples-per-insert", type=float, default=None, help="upper bound on learner replay ratio")
    actorq.add_argument("--batch-size", type=positive_int, default=None)
    actorq.add_argument("--learning-starts", type=int, default=None, help="transitions before training (rl-zoo3's)")
    actorq.add_argument("--max-actor-steps", type=positive_int, default=None, help="per actor (default 50000)")
    actorq.add_argument("--target-reward", type=float, default=None, help="stop once the learner reaches it")
    actorq.add_argument("--max-seconds", type=float, default=None, help="stop after this much wall-clock time")
    actorq.add_argument("--eval-every", type=float, default=None, help="seconds between learner evaluations")
    actorq.add_argument("--seed", type=int, default=None)
    actorq.add_argument("--address", default=None, help="Ray cluster address (default: a local cluster)")
    actorq.add_argument("--store", type=Path, default=None, help="results database (default results/quarl.sqlite)")

    report = commands.add_parser("report", help="write the reward-error table and sweet-spot figures from the store")
    report.add_argument("--store", type=Path, default=None, help="results database (default results/quarl.sqlite)")
    report.add_argument("--out", type=Path, default=Path("results"), help="output folder (default results/)")
    report.add_argument("--paper", type=Path, default=config_dir() / "quarl_paper_table2.csv",
                        help="published numbers to compare with (default zoo_configs/quarl_paper_table2.csv)")  # fmt: skip

    train = commands.add_parser("train", help="train an fp32 baseline with rl-zoo3's hyperparameters into the cache")
    train.add_argument("--algo", required=True, choices=ALGOS)
    train.add_argument("--env", required=True)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--n-timesteps", type=positive_int, default=None, help="override rl-zoo3's budget")
    train.add_argument("--cache", type=Path, default=None, help="agent cache (default results/agents)")

    results = commands.add_parser("results", help="print the results store; export it")
    results.add_argument("--store", type=Path, default=None)
    results.add_argument("--algo", default=None)
    results.add_argument("--env", default=None)
    results.add_argument("--csv", type=Path, default=None, help="write the rows to this CSV file")
    results.add_argument("--parquet", type=Path, default=None, help="write the rows to this Parquet file")
    return parser  # fmt: skip


def add_agent_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--algo", required=True, type=str.lower, choices=ALGOS, metavar="ALGO", help=f"one of {', '.join(ALGOS)}"
    )
    parser.add_argument("--env", required=True, help="env id or alias (CartPole, Breakout, HalfCheetah, ...)")
    parser.add_argument("--folder", type=Path, default=None, help="rl-zoo3 log folder to take agents from ($QUARL_ZOO)")
    parser.add_argument("--cache", type=Path, default=None, help="agent cache (default results/agents)")
    parser.add_argument("--no-hub", action="store_true", help="do not try the Hugging Face hub")
    parser.add_argument(
        "--train-if-missing",
        action="store_true",
        help="train an fp32 baseline with rl-zoo3's hyperparameters when no agent is found",
    )
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed (env i gets seed + i)")  # fmt: skip


def widths(value: str) -> tuple[int, ...]:
    """Hidden layer widths from ``2048,2048``."""
    parts = value.split(",")
    if not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"bad widths {value!r}: expected comma-separated positive integers (256,256)")
    return tuple(int(part) for part in parts)


def positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"bad value {value!r}: expected a positive integer")
    return int(value)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        commands = {
            "run": cmd_run,
            "sweep": cmd_sweep,
            "qat": cmd_qat,
            "amp": cmd_amp,
            "actorq": cmd_actorq,
            "report": cmd_report,
            "train": cmd_train,
            "results": cmd_results,
        }
        return commands[args.command](args)
    except QuarlError as error:
        print(f"quarl-bench: error: {error}", file=sys.stderr)
        return 2


def cmd_run(args: argparse.Namespace) -> int:
    from quarl_bench.runner import EvalSettings, build_jobs, run_jobs
    from quarl_bench.store import DEFAULT_STORE, ResultStore
    from quarl_bench.zoo.agents import DEFAULT_CACHE, resolve_agent

    specs = [QuantSpec(p, args.granularity, args.symmetric, args.quantize_bias) for p in args.bits]
    ref = resolve_agent(args.algo, args.env, args.folder, args.cache or DEFAULT_CACHE, not args.no_hub,
                        args.train_if_missing, args.seed)  # fmt: skip
    console.print(
        f"Agent: [bold]{ref.algo}/{ref.env_id}[/] from {ref.source} ({ref.run_dir}, sha256 {ref.content_hash})"
    )
    if ref.saved_env_id != ref.env_id:
        console.print(f"Note: this agent was saved for {ref.saved_env_id}; it runs on {ref.env_id}.")
    jobs = build_jobs(ref, specs, EvalSettings(args.episodes, args.seed, args.n_envs))
    with ResultStore(args.store or DEFAULT_STORE) as store:

        def report(row: dict[str, Any], reused: bool) -> None:
            how = "reused from the store" if reused else f"{row['wall_seconds']:.1f} s"
            console.print(f"  {row['precision']:>5}: {row['mean_reward']:.2f} ± {row['std_reward']:.2f} ({how})")

        rows = run_jobs(ref, jobs, store, force=args.force, on_result=report)
        console.print(result_table(rows, ref))
        console.print(f"Stored in {store.path}")
    return 0


def result_table(rows: list[dict[str, Any]], ref: AgentRef | SimpleNamespace) -> Table:
    first = rows[0]
    title = f"{ref.algo} / {ref.env_id} ({ref.source}): {first['episodes']} episodes, seed {first['seed']}"
    table = Table(title=title)
    for column in ("precision", "reward", "fp32 reward", "E %", "vs fp32 actions", "episodes", "seconds"):
        table.add_column(column, justify="left" if column == "precision" else "right")
    for row in rows:
        table.add_row(
            row["precision"],
            f"{row['mean_reward']:.2f} ± {row['std_reward']:.2f}",
            f"{first['mean_reward']:.2f}",
            format_number(row["error_pct"], "{:+.2f}"),
            agreement_text(row["agreement"]),
            str(row["episodes"]),
            f"{row['wall_seconds']:.1f}",
        )
    return table


def agreement_text(agreement: dict[str, float]) -> str:
    if "action_agreement" in agreement:
        return f"{100 * agreement['action_agreement']:.1f} % same"
    if "action_l2" in agreement:
        return f"L2 {agreement['action_l2']:.3f} ({100 * agreement['action_rel_error']:.1f} %)"
    return "-"


def format_number(value: float | None, pattern: str) -> str:
    return "-" if value is None or math.isnan(value) else pattern.format(value)


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from quarl_bench.registry import load_study, select
    from quarl_bench.store import DEFAULT_STORE, ResultStore
    from quarl_bench.sweep import (
        AgentSources,
        QATTask,
        default_workers,
        plan,
        run_tasks,
        run_tasks_on_ray,
        with_episodes,
    )
    from quarl_bench.zoo.agents import DEFAULT_CACHE, ZOO_ENV

    study = load_study(args.grid)
    cells = with_episodes(select(study.cells, args.algo, args.env, args.bits), args.episodes)
    if not cells:
        raise QuarlError(f"no job in {args.grid} matches the filters: check --algo/--env/--bits")
    folder = args.folder or (Path(os.environ[ZOO_ENV]) if os.environ.get(ZOO_ENV) else None)
    sources = AgentSources(folder, args.cache or DEFAULT_CACHE, args.hub, args.train_if_missing)
    workers = args.workers or default_workers()
    store_path = args.store or DEFAULT_STORE
    with ResultStore(store_path) as store:
        tasks, skipped, already = plan(cells, sources, store, workers, args.force)
        for skip in skipped:
            console.print(f"[yellow]skipped[/] {skip.algo}/{skip.env_id}: {skip.reason}")
        keys = [job.key for task in tasks for job in task.jobs]
        n_qat = sum(isinstance(task, QATTask) for task in tasks)
        console.print(
            f"Study {study.name}: {len(cells)} grid cells, {len(keys)} evaluations and {n_qat} QAT runs to do, "
            f"{already} already stored, {len(skipped)} agent(s) skipped; {workers} worker(s)"
        )
        failures: list[str] = []
        finished = {"units": 0}  # jobs of finished tasks + finished QAT runs
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, TextColumn("{task.fields[last]}"), console=console) as progress:
            bar = progress.add_task("jobs", total=len(keys) + n_qat, last="")

            def tick() -> None:
                stored = 0 if args.force else sum(store.has(key) for key in keys)  # finer than whole tasks
                progress.update(bar, completed=max(stored, finished["units"]))

            def done(task, rows, error) -> None:
                finished["units"] += len(task.jobs) or 1
                if error is not None:
                    failures.append(f"{task.ref.algo}/{task.ref.env_id}: {error}")
                    return
                last = rows[-1]
                progress.update(
                    bar,
                    last=f"last: {last['algo']}/{last['env_id']} {last['method']} {last['precision']} {last['mean_reward']:.1f}",
                )

            if args.executor == "ray":
                run_tasks_on_ray(tasks, store, args.address, args.force, on_done=done, on_tick=tick)
            else:
                run_tasks(tasks, store_path, workers, args.force, on_done=done, on_tick=tick)
        for failure in failures:
            console.print(f"[red]failed[/] {failure}")
        frame = store.to_dataframe() if store.path.exists() else None
    if frame is not None:
        console.print(summary_table(study_rows(frame, cells), f"{study.name}: results in {store_path}"))
    return 1 if failures else 0


def study_rows(frame, cells):
    """The stored rows that a study's cells produced (QAT rows: any training seed, evaluated on seed 0)."""
    ptq = {(c.algo, c.env_id, c.precision, c.seed, c.episodes) for c in cells if c.method == "ptq"}
    qat = {(c.algo, c.env_id, c.precision, c.episodes) for c in cells if c.method == "qat"}
    keep = [
        (m == "ptq" and (a, e, p, s, n) in ptq) or (m == "qat" and (a, e, p, n) in qat)
        for m, a, e, p, s, n in zip(
            frame.method, frame.algo, frame.env_id, frame.precision, frame.seed, frame.episodes, strict=True
        )
    ]
    return frame[keep]


def summary_table(frame, title: str) -> Table:
    table = Table(title=title)
    for column in ("algo", "env", "method", "precision", "reward", "E %", "vs fp32 actions", "episodes"):
        table.add_column(column)
    for _, row in frame.sort_values(
        ["algo", "env_id", "method", "bits"], ascending=[True, True, True, False]
    ).iterrows():
        table.add_row(
            row["algo"],
            row["env_id"],
            row["method"],
            row["precision"],
            f"{row['mean_reward']:.2f} ± {row['std_reward']:.2f}",
            format_number(row["error_pct"], "{:+.2f}"),
            agreement_text(row["agreement"]),
            str(row["episodes"]),
        )
    return table


def cmd_qat(args: argparse.Namespace) -> int:
    from quarl_bench.qat_runner import resolve_config, run_qat
    from quarl_bench.runner import EvalSettings
    from quarl_bench.store import DEFAULT_STORE, ResultStore
    from quarl_bench.zoo.agents import DEFAULT_CACHE

    config = resolve_config(args.algo, args.env, args.bits, quant_delay=args.quant_delay, n_timesteps=args.n_timesteps,
                            seed=args.seed, quantize_activations=args.quantize_activations)  # fmt: skip
    console.print(f"QAT: {config.algo}/{config.env_id} at {config.precision}, training seed {config.seed}")
    with ResultStore(args.store or DEFAULT_STORE) as store:
        rows = run_qat(config, args.cache or DEFAULT_CACHE, store, EvalSettings(args.episodes, args.eval_seed))
        training = rows[-1]["provenance"]["training"]
        console.print(
            f"trained {training['training_steps']} steps, fake quantization on from step {training['enabled_at_step']}"
            f" (delay {training['quant_delay']}); agent in {rows[-1]['agent_path']}"
        )
        ref = SimpleNamespace(algo=config.algo, env_id=config.env_id, source="qat")
        console.print(result_table(rows, ref))
        console.print(f"Stored in {store.path}")
    return 0


ACTORQ_FLAGS = {  # flag dest -> ActorQConfig field, for the settings a flag can override
    "comm_bits": "comm_bits", "n_actors": "n_actors", "policy_arch": "policy_arch", "pull_period": "pull_period",
    "samples_per_insert": "samples_per_insert", "batch_size": "batch_size", "learning_starts": "learning_starts",
    "max_actor_steps": "max_actor_steps", "target_reward": "target_reward", "max_seconds": "max_seconds",
    "eval_every": "eval_every_s", "int8_backend": "int8_backend",
}  # fmt: skip


def actorq_configs(args: argparse.Namespace) -> list:
    """The runs a ``quarl-bench actorq`` command asks for (see ``requested_runs``)."""
    from quarl_bench.actorq.grid import requested_runs

    overrides = {field: getattr(args, flag) for flag, field in ACTORQ_FLAGS.items() if getattr(args, flag) is not None}
    return requested_runs(args.grid, overrides, args.algo, args.env, args.actor_precision, args.seed)


def cmd_actorq(args: argparse.Namespace) -> int:
    from quarl_bench.actorq.run import already_stored
    from quarl_bench.store import DEFAULT_STORE, ResultStore

    configs = actorq_configs(args)
    for config in configs:
        config.env_spaces()  # a bad algo/env pair fails before any run starts
    for number, config in enumerate(configs, 1):
        with ResultStore(args.store or DEFAULT_STORE) as store:
            if len(configs) > 1 and already_stored(config, store):
                console.print(f"[{number}/{len(configs)}] {config.algo} {config.env_id} {config.actor_precision}: "
                              "already in the store, skipped")  # fmt: skip
                continue
        if len(configs) > 1:
            console.print(f"[{number}/{len(configs)}]", end=" ")
        run_one_actorq(config, args.address, args.store or DEFAULT_STORE)
    return 0


def run_one_actorq(config, address: str | None, store_path: Path) -> None:
    from quarl_bench.actorq.metrics import breakdown
    from quarl_bench.actorq.run import run_actorq, store_run
    from quarl_bench.store import ResultStore

    console.print(f"ActorQ: {config.algo} {config.env_id}, {config.n_actors} {config.actor_precision} actors, "
                  f"policy {list(config.policy_arch)}, comm {config.comm_bits} bits")  # fmt: skip
    outcome = run_actorq(config, address, on_eval=lambda p, _: console.print(
        f"  {p['seconds']:7.1f} s  {p['actor_steps']:>8} actor steps  {p['updates']:>7} updates  reward {p['reward']:.1f}"))  # fmt: skip
    if outcome.error:
        if outcome.curve:
            with ResultStore(store_path) as store:
                store_run(config, outcome, store)
        raise QuarlError(f"ActorQ run stopped: {outcome.error}; {len(outcome.curve)} evaluations kept in the store")
    with ResultStore(store_path) as store:
        row = store_run(config, outcome, store)
    table = Table(title="Actor runtime breakdown (seconds, summed over actors)")
    phases = breakdown(outcome.actors)
    for phase in phases:
        table.add_column(phase, justify="right")
    table.add_row(*[f"{seconds:.1f}" for seconds in phases.values()])
    console.print(table)
    console.print(
        f"{row['provenance']['actor_steps']} actor steps in {outcome.wall_seconds:.1f} s "
        f"({row['provenance']['actor_steps_per_s']:.0f}/s); learner {outcome.learner['updates']} updates "
        f"(samples per insert {outcome.learner['samples_per_insert']:.2f}); {outcome.broadcasts} broadcasts of "
        f"{outcome.broadcast_bytes} bytes; int8 weights on actors: {all(a['int8_weights'] for a in outcome.actors)}; "
        f"actor restarts: {outcome.restarts}; final reward {row['mean_reward']:.1f}; stored in {store.path}"
    )
    energy = outcome.energy
    console.print(
        f"energy {energy['kwh'] * 1000:.3f} Wh, {energy['emissions_kg'] * 1000:.3f} g CO2eq ({energy['source']})"
    )


def torch_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def cmd_amp(args: argparse.Namespace) -> int:
    from quarl_bench.amp_runner import AmpConfig, run_amp
    from quarl_bench.runner import EvalSettings
    from quarl_bench.store import DEFAULT_STORE, ResultStore
    from quarl_bench.zoo.agents import DEFAULT_CACHE
    from quarl_bench.zoo.envs import resolve_env_id

    env_id = resolve_env_id(args.env)
    table = Table(title=f"Mixed-precision training: {args.algo} {env_id}, {args.n_timesteps} steps, seed {args.seed}")
    for column in ("policy", "dtype", "ms / update", "updates", "train s", "speed-up", "final reward"):
        table.add_column(column, justify="left" if column in ("policy", "dtype") else "right")
    with ResultStore(args.store or DEFAULT_STORE) as store:
        for arch in args.policy_arch:
            rows = {}
            for dtype in ("fp32", args.dtype):
                config = AmpConfig(args.algo, env_id, arch, dtype, args.n_timesteps, args.seed)
                console.print(f"training {arch} policy in {dtype} ...")
                rows[dtype] = run_amp(config, args.cache or DEFAULT_CACHE, store, EvalSettings(args.episodes, 0))
            base = rows["fp32"]["provenance"]["training"]["ms_per_update"]
            for dtype, row in rows.items():
                training = row["provenance"]["training"]
                table.add_row(arch, dtype, f"{training['ms_per_update']:.2f}", str(training["updates"]),
                              f"{training['train_seconds']:.1f}", f"{base / training['ms_per_update']:.2f}x",
                              f"{row['mean_reward']:.1f} ± {row['std_reward']:.1f}")  # fmt: skip
    console.print(table)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from quarl_bench.report.actorq import write_actorq_report
    from quarl_bench.report.plots import write_qat_figures, write_sweet_spot_figures, write_weight_figures
    from quarl_bench.report.tables import (
        qat_vs_ptq_table,
        reward_error_table,
        write_amp_table,
        write_paper_vs_measured,
        write_qat_vs_ptq,
        write_reward_error_table,
        write_weight_spread,
    )
    from quarl_bench.store import DEFAULT_STORE, load_results

    path = args.store or DEFAULT_STORE
    if not Path(path).is_file():
        raise QuarlError(f"no results store at {str(path)!r}: run `quarl-bench run` or `sweep` first, or pass --store")
    frame = load_results(path)
    table = reward_error_table(frame)
    written = write_reward_error_table(table, args.out) if not table.empty else []
    written += write_sweet_spot_figures(frame, args.out)
    written += write_weight_figures(frame, args.out)
    written += write_weight_spread(frame, args.out)
    written += write_qat_vs_ptq(frame, args.out)
    written += write_paper_vs_measured(frame, args.paper, args.out)
    written += write_actorq_report(frame, args.out)
    written += write_amp_table(frame, args.out)
    written += write_qat_figures(qat_vs_ptq_table(frame), args.out)
    if not table.empty:
        console.print(table.round(2).to_string())
    for file in written:
        console.print(f"wrote {file}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from quarl_bench.zoo.agents import DEFAULT_CACHE, find_in_folder
    from quarl_bench.zoo.envs import resolve_env_id
    from quarl_bench.zoo.train import train_baseline

    env_id = resolve_env_id(args.env)
    cache = args.cache or DEFAULT_CACHE
    train_baseline(args.algo, env_id, cache, args.seed, args.n_timesteps)
    ref = find_in_folder(cache, args.algo, env_id, "trained")
    console.print(f"Saved {args.algo}/{env_id} in {ref.run_dir if ref else cache}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from quarl_bench.store import DEFAULT_STORE, load_results

    path = args.store or DEFAULT_STORE
    if not Path(path).is_file():
        raise QuarlError(f"no results store at {str(path)!r}: run `quarl-bench run` first or pass --store PATH")
    frame = load_results(path)
    if args.algo:
        frame = frame[frame["algo"] == args.algo]
    if args.env:
        frame = frame[frame["env_id"].str.startswith(args.env)]
    if args.csv:
        frame.to_csv(args.csv, index=False)
        console.print(f"Wrote {len(frame)} rows to {args.csv}")
    if args.parquet:
        frame.to_parquet(args.parquet, index=False)
        console.print(f"Wrote {len(frame)} rows to {args.parquet}")
    table = Table(title=f"{len(frame)} results in {path}")
    columns = ("algo", "env_id", "method", "precision", "mean_reward", "std_reward", "error_pct", "episodes", "seed")
    for column in columns:
        table.add_column(column)
    for _, row in frame.iterrows():
        table.add_row(*[format_cell(row[c]) for c in columns])
    console.print(table)
    return 0


def format_cell(value: Any) -> str:
    if isinstance(value, float):
        return format_number(value, "{:.2f}")
    return str(value)


if __name__ == "__main__":
    raise SystemExit(main())
