"""``quarl-bench`` command line: argparse and one call per command (``commands.py``). No torch, gymnasium or Ray
is imported until a command runs, so ``--help`` and argument errors are instant."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from quarl_bench.arguments import (
    add_agent,
    add_algo,
    add_calibration,
    add_evaluation,
    add_recipe,
    add_sources,
    add_spec,
    add_store,
    non_negative_float,
    positive_int,
    precision_arg,
    ratio_cap,
    tolerance,
    widths,
)
from quarl_bench.config import config_dir
from quarl_bench.errors import QuarlError
from quarl_bench.types import (
    ACTORQ_ALGOS,
    ALGOS,
    BACKEND_PRECISIONS,
    PRECISION_HELP,
    ROLLOUT_BACKENDS,
    ROLLOUT_CORRECTIONS,
)

BACKENDS = tuple(BACKEND_PRECISIONS)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        print(f"quarl-bench: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="quarl-bench", description="What does quantization do to RL policies?")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = commands.add_parser("run", help="post-training quantize an agent and evaluate it against fp32")
    add_agent(run)
    run.add_argument(
        "--bits",
        nargs="+",
        type=precision_arg,
        default=["int8"],
        metavar="P",
        help=f"precision(s): {PRECISION_HELP}; 32 is the unquantized policy (default 8)",
    )
    add_spec(run)
    add_recipe(run)
    run.add_argument(
        "--random-baseline",
        action="store_true",
        help="also evaluate a uniform-random policy (the 0 of the report's normalised scores)",
    )
    add_evaluation(run, "precision", statistics=True)

    sensitivity = commands.add_parser(
        "sensitivity", help="quantize one acting layer at a time: which layers break a policy"
    )
    add_agent(sensitivity)
    sensitivity.add_argument(
        "--bits",
        nargs="+",
        type=precision_arg,
        default=["int8", "int6", "int4", "int2"],
        metavar="P",
        help="precisions each layer is tried at (default 8 6 4 2)",
    )
    add_evaluation(sensitivity, "layer and precision", statistics=True)

    mixed = commands.add_parser("mixed", help="search a per-layer bit allocation within a reward tolerance")
    add_agent(mixed)
    mixed.add_argument(
        "--bits",
        nargs="+",
        type=precision_arg,
        default=["fp16", "int8", "int6", "int4", "int2"],
        metavar="P",
        help="candidate precisions per layer (default fp16 8 6 4 2)",
    )
    mixed.add_argument("--tolerance", type=tolerance, default=5.0, help="%% of the fp32 reward it may lose (default 5)")
    mixed.add_argument("-n", "--episodes", type=positive_int, default=100, help="episodes per evaluation and seed")
    mixed.add_argument(
        "--n-envs", type=positive_int, default=None, help="envs evaluated at once (default per env kind)"
    )
    mixed.add_argument("--search-seeds", type=int, nargs="+", default=[0], help="seeds the search evaluates on")
    mixed.add_argument(
        "--verify-seeds",
        type=int,
        nargs="+",
        default=[100, 101, 102],
        help="fresh seeds the found allocation is verified on (default 100 101 102)",
    )
    mixed.add_argument("--seed", type=int, default=0, help="training seed if --train-if-missing trains the agent")
    add_store(mixed)

    fidelity = commands.add_parser("fidelity", help="fp32 and quantized policies side by side: where trajectories part")
    add_agent(fidelity)
    fidelity.add_argument(
        "--bits",
        nargs="+",
        type=precision_arg,
        default=["fp16", "int8", "int4", "int2"],
        metavar="P",
        help="precisions compared with fp32 (32: fp32 against itself)",
    )
    add_spec(fidelity)
    fidelity.add_argument(
        "--threshold",
        type=non_negative_float,
        default=0.1,
        help="observations part when max |fp32 - quantized| exceeds this (default 0.1)",
    )
    fidelity.add_argument("-n", "--episodes", type=positive_int, default=20, help="episodes (one per env, default 20)")
    fidelity.add_argument("--seed", type=int, default=0, help="env i gets seed + i in both runs")
    fidelity.add_argument(
        "--obs-noise",
        type=non_negative_float,
        default=0.0,
        metavar="SIGMA",
        help="the same Gaussian noise draws on both runs' observations (default 0)",
    )
    add_store(fidelity)
    fidelity.add_argument("--force", action="store_true", help="measure again what the store has")

    sweep = commands.add_parser("sweep", help="run a YAML job grid (zoo_configs/*.yaml), resuming where it stopped")
    sweep.add_argument("grid", type=Path, help="grid file, e.g. zoo_configs/sweetspot.yaml")
    sweep.add_argument("--algo", nargs="+", type=str.lower, default=None, help="only these algos")
    sweep.add_argument("--env", nargs="+", default=None, help="only these envs (ids or aliases)")
    sweep.add_argument("--bits", nargs="+", type=precision_arg, default=None, metavar="P", help="only these precisions")
    sweep.add_argument("-n", "--episodes", type=positive_int, default=None, help="override the grid's episodes")
    sweep.add_argument(
        "--eval-seeds",
        type=int,
        nargs="+",
        default=None,
        metavar="S",
        help="evaluation seeds for every PTQ cell (override the grid's seeds; paired like run's)",
    )
    sweep.add_argument(
        "--random-baseline",
        action="store_true",
        help="also evaluate the uniform-random policy once per agent and seed (the 0 of the "
        "report's normalised-score aggregates)",
    )
    add_sources(sweep)
    sweep.add_argument("--hub", action="store_true", help="also try the Hugging Face hub for missing agents")
    sweep.add_argument("--workers", type=positive_int, default=None, help="parallel processes (default: the cores)")
    sweep.add_argument("--executor", choices=("local", "ray"), default="local", help="process pool, or a Ray cluster")
    sweep.add_argument("--address", default=None, help="Ray cluster address (default: start a local cluster)")
    add_store(sweep)
    sweep.add_argument("--force", action="store_true", help="re-run jobs already in the store")

    qat = commands.add_parser("qat", help="quantization-aware training with rl-zoo3 hyperparameters, then evaluation")
    add_algo(qat, required=True)
    qat.add_argument("--env", required=True, help="env id or alias")
    qat.add_argument("--bits", required=True, type=precision_arg, metavar="P", help="2-8 or 16 (or fp16, bf16)")
    qat.add_argument("--quant-delay", type=positive_int, default=None, help="steps before quantization (default: half)")
    qat.add_argument("-n", "--n-timesteps", type=positive_int, default=None, help="training steps (default: rl-zoo3's)")
    qat.add_argument("--seed", type=int, default=0, help="training seed")
    qat.add_argument("--quantize-activations", action="store_true", help="also fake-quantize layer outputs")
    qat.add_argument("--episodes", type=positive_int, default=100, help="evaluation episodes (default 100)")
    qat.add_argument("--eval-seed", type=int, default=0, help="evaluation seed")
    qat.add_argument("--cache", type=Path, default=None, help="agent cache (default results/agents)")
    add_store(qat)

    amp = commands.add_parser("amp", help="mixed-precision training timing: fp32 vs autocast for three policy sizes")
    add_algo(amp, default="dqn")
    amp.add_argument("--env", default="CartPole-v1", help="env id or alias (default CartPole-v1)")
    amp.add_argument(
        "--policy-arch", nargs="+", choices=("small", "medium", "large"), default=["small", "medium", "large"]
    )
    amp.add_argument(
        "--dtype", default=None, choices=("bf16", "fp16"), help="autocast type (default: bf16 on CPU, fp16 on GPU)"
    )
    amp.add_argument("-n", "--n-timesteps", type=positive_int, default=20_000, help="training steps per run")
    amp.add_argument("--seeds", "--seed", type=int, nargs="+", default=[0], help="training seeds (default 0)")
    amp.add_argument(
        "--device",
        default=None,
        choices=("cpu", "cuda"),
        help="where both trainings run (default: cuda when there is a GPU)",
    )
    amp.add_argument("--episodes", type=positive_int, default=20, help="evaluation episodes of each trained agent")
    amp.add_argument("--cache", type=Path, default=None, help="agent cache (default results/agents)")
    add_store(amp)

    actorq = commands.add_parser(
        "actorq",
        help="ActorQ: fp32 learner, quantized actors on Ray; speed and reward",
        description="One run from the flags, or every run of --grid (flags given override its settings). "
        "Defaults: dqn, CartPole-v1, int8 actors, 2 actors, 2048,2048,2048.",
    )
    actorq.add_argument("--grid", type=Path, default=None, help="study file, e.g. zoo_configs/actorq.yaml")
    actorq.add_argument(
        "--algo",
        default=None,
        choices=ACTORQ_ALGOS,
        help="learner: dqn (discrete actions) or td3/ddpg/d4pg (continuous)",
    )
    actorq.add_argument("--env", default=None, help="env id or alias (default CartPole-v1)")
    actorq.add_argument("--actor-precision", default=None, choices=("fp32", "fp16", "int8"))
    actorq.add_argument(
        "--int8-backend",
        default=None,
        choices=("onnxruntime", "torch"),
        help="int8 actor kernels (default onnxruntime: the faster one here)",
    )
    actorq.add_argument("--comm-bits", type=int, default=None, help="bits per broadcast weight: 32, 16 or 2-8")
    actorq.add_argument("--n-actors", type=positive_int, default=None)
    actorq.add_argument(
        "--policy-arch", type=widths, default=None, help="hidden widths, comma-separated (default 2048,2048,2048)"
    )
    actorq.add_argument("--pull-period", type=positive_int, default=None, help="actor steps between weight pulls")
    actorq.add_argument("--samples-per-insert", type=float, default=None, help="upper bound on learner replay ratio")
    actorq.add_argument("--batch-size", type=positive_int, default=None)
    actorq.add_argument("--learning-starts", type=int, default=None, help="transitions before training (rl-zoo3's)")
    actorq.add_argument("--max-actor-steps", type=positive_int, default=None, help="per actor (default 50000)")
    actorq.add_argument("--target-reward", type=float, default=None, help="stop once the learner reaches it")
    actorq.add_argument("--max-seconds", type=float, default=None, help="stop after this much wall-clock time")
    actorq.add_argument("--eval-every", type=float, default=None, help="seconds between learner evaluations")
    actorq.add_argument("--eval-episodes", type=positive_int, default=None, help="episodes per evaluation (default 10)")
    actorq.add_argument(
        "--seeds",
        "--seed",
        type=int,
        nargs="+",
        default=None,
        help="one run per seed for each precision (the speed-up table's CIs are over seeds)",
    )
    actorq.add_argument(
        "--learner-device",
        default=None,
        choices=("cpu", "cuda"),
        help="where the learner trains (default: cuda when there is a GPU); actors stay on CPU cores",
    )
    actorq.add_argument("--address", default=None, help="Ray cluster address (default: a local cluster)")
    add_store(actorq)

    add_rollout(commands)

    deploy = commands.add_parser("deploy", help="build real fp16/int8 artifacts of an agent, play, time and weigh them")
    add_agent(deploy, hub=False)
    deploy.add_argument(
        "--backend",
        nargs="+",
        choices=BACKENDS,
        metavar="B",
        default=["ort-fp32", "ort-fp16", "ort-int8-dynamic", "ort-int8-static"],
        help=f"one or more of {', '.join(BACKENDS)} (torch-fp32, the reference, always runs)",
    )
    add_calibration(deploy)
    add_evaluation(deploy, "backend")

    export = commands.add_parser("export", help="write one backend's artifact of an agent, with a README next to it")
    add_agent(export, hub=False)
    export.add_argument("--backend", required=True, choices=BACKENDS, metavar="B", help=f"one of {', '.join(BACKENDS)}")
    add_calibration(export)
    export.add_argument("--out", type=Path, required=True, help="artifact file to write, e.g. policy.onnx")

    table4 = commands.add_parser("table4", help="QuaRL Table 4: time synthetic policies I-III per backend, store it")
    table4.add_argument(
        "--policy",
        nargs="+",
        choices=("I", "II", "III"),
        default=["I", "II", "III"],
        help="which of QuaRL's Table 4 policies (default all three)",
    )
    table4.add_argument(
        "--backend",
        nargs="+",
        choices=BACKENDS,
        metavar="B",
        default=["ort-fp32", "ort-fp16", "ort-int8-dynamic", "ort-int8-static", "torchao-int8"],
        help=f"one or more of {', '.join(BACKENDS)} (torch-fp32, the reference, always runs)",
    )
    table4.add_argument("--calls", type=positive_int, default=1000, help="timed batch-1 calls (default 1000)")
    add_store(table4)
    table4.add_argument("--force", action="store_true", help="time again what the store already has")

    report = commands.add_parser("report", help="write the paper's tables and figures from the store")
    add_store(report)
    report.add_argument("--out", type=Path, default=Path("results"), help="output folder (default results/)")
    report.add_argument(
        "--paper",
        type=Path,
        default=config_dir() / "paper",
        help="folder of the papers' published numbers (default zoo_configs/paper)",
    )
    report.add_argument(
        "--tolerance",
        type=tolerance,
        default=5.0,
        help="minimum safe bit width: %% of the fp32 reward the CI lower bound may lose (default 5)",
    )
    report.add_argument(
        "--html", action="store_true", help="also write report.html: one self-contained page, figures embedded"
    )

    train = commands.add_parser("train", help="train an fp32 baseline with rl-zoo3's hyperparameters into the cache")
    train.add_argument("--algo", required=True, choices=ALGOS)
    train.add_argument("--env", required=True)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--n-timesteps", type=positive_int, default=None, help="override rl-zoo3's budget")
    train.add_argument("--cache", type=Path, default=None, help="agent cache (default results/agents)")

    results = commands.add_parser("results", help="print the results store; export it")
    add_store(results)
    results.add_argument("--algo", default=None)
    results.add_argument("--env", default=None)
    results.add_argument("--csv", type=Path, default=None, help="write the rows to this CSV file")
    results.add_argument("--parquet", type=Path, default=None, help="write the rows to this Parquet file")
    return parser


def add_rollout(commands) -> None:
    rollout = commands.add_parser(
        "rollout",
        help="train PPO/A2C on rollouts played by a quantized policy copy; mismatch and final reward",
        description="Every precision x correction x seed of the flags, each after its fp32-rollout reference run "
        "(or the runs of --grid, filtered by the flags). rl-zoo3's hyperparameters; the behaviour policy is "
        "re-quantized after every update; the trained fp32 policy is evaluated at the end.",
    )
    rollout.add_argument("--grid", type=Path, default=None, help="study file, e.g. zoo_configs/rollout.yaml")
    rollout.add_argument("--algo", default=None, type=str.lower, choices=ALGOS, help="ppo (default) or a2c")
    rollout.add_argument("--env", default=None, help="env id or alias")
    rollout.add_argument(
        "--rollout-precision",
        nargs="+",
        type=precision_arg,
        default=None,
        metavar="P",
        help=f"behaviour policy precision(s): {PRECISION_HELP} (default int8)",
    )
    rollout.add_argument(
        "--correction",
        nargs="+",
        choices=ROLLOUT_CORRECTIONS,
        default=None,
        help="none (naive: PPO's ratio against the quantized policy), tis (x min(pi/pi_q, C)), "
        "mis (drop samples outside [1/C, C]); default none",
    )
    rollout.add_argument("--cap", type=ratio_cap, default=None, help="the ratio cap C (default 2.0)")
    rollout.add_argument("--seeds", "--seed", type=int, nargs="+", default=None, help="training seeds (default 0)")
    rollout.add_argument(
        "-n", "--n-timesteps", type=positive_int, default=None, help="training steps (default rl-zoo3's)"
    )
    rollout.add_argument(
        "--rollout-backend",
        choices=ROLLOUT_BACKENDS,
        default=None,
        help="torch: weights on the PTQ grid (default); onnxruntime: int8 kernels (int8 only)",
    )
    rollout.add_argument(
        "--episodes", type=positive_int, default=None, help="evaluation episodes of each trained policy (default 100)"
    )
    rollout.add_argument("--workers", type=positive_int, default=None, help="parallel runs (default: the cores)")
    rollout.add_argument("--executor", choices=("local", "ray"), default="local", help="process pool, or Ray")
    rollout.add_argument("--address", default=None, help="Ray cluster address (default: start a local cluster)")
    rollout.add_argument("--cache", type=Path, default=None, help="trained agents (default results/agents)")
    add_store(rollout)
    rollout.add_argument("--force", action="store_true", help="train again runs the store already has")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    from quarl_bench import commands, provenance
    from quarl_bench.zoo.quiet import quiet_libraries

    provenance.set_command(argv)
    try:
        with quiet_libraries():
            return getattr(commands, args.command)(args)
    except QuarlError as error:
        print(f"quarl-bench: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
