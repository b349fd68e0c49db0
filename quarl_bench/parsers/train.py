"""Commands that train: qat, amp, actorq, rollout, train."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quarl_bench.actorq.config import ACTOR_INT8_RUNTIMES, ACTOR_PRECISIONS, EVAL_CLOCKS, FLAG_SETTINGS, ActorQConfig
from quarl_bench.methods.qat import QATConfig
from quarl_bench.methods.rollout import RolloutConfig
from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import (
    ENV_HELP,
    add_algo,
    add_cache,
    add_env,
    add_executor,
    add_store,
    add_timesteps,
    non_negative_float,
    positive_int,
    precision_arg,
    widths,
)
from quarl_bench.parsers.config_flags import config_flag
from quarl_bench.precision import help_text
from quarl_bench.training.options import ROLLOUT_BACKENDS, ROLLOUT_CORRECTIONS
from quarl_bench.zoo.algorithms import ACTORQ_ALGOS, ALGOS


def add_qat(commands: Subcommands) -> None:
    qat = commands.add_parser("qat", help="quantization-aware training with rl-zoo3 hyperparameters, then evaluation")
    qat.set_defaults(handler=handler("train:qat"))
    add_algo(qat, required=True)
    add_env(qat, required=True)
    # QAT's own set (QATConfig checks it), not every registered precision
    qat.add_argument("--bits", required=True, type=precision_arg, metavar="P", help="int2-int8, int16, fp16 or bf16")
    config_flag(qat, QATConfig, "quant_delay", alone=False)
    add_timesteps(
        qat, None, "training timesteps, as in rl-zoo3 (default: rl-zoo3's); evaluation episodes are --episodes"
    )
    config_flag(qat, QATConfig, "seed", alone=False)
    config_flag(qat, QATConfig, "quantize_activations")
    qat.add_argument("--episodes", type=positive_int, default=100, help="evaluation episodes (default %(default)s)")
    qat.add_argument("--eval-seed", type=int, default=0, help="evaluation seed")
    add_cache(qat)
    add_store(qat)


def add_amp(commands: Subcommands) -> None:
    amp = commands.add_parser("amp", help="mixed-precision training timing: fp32 vs autocast for three policy sizes")
    amp.set_defaults(handler=handler("train:amp"))
    add_algo(amp, default="dqn")
    add_env(amp, default="CartPole-v1")
    amp.add_argument(
        "--policy-arch", nargs="+", choices=("small", "medium", "large"), default=["small", "medium", "large"]
    )
    amp.add_argument(
        "--dtype", default=None, choices=("bf16", "fp16"), help="autocast type (default: bf16 on CPU, fp16 on GPU)"
    )
    add_timesteps(
        amp,
        20_000,
        "training timesteps per run, as in rl-zoo3 (default %(default)s); evaluation episodes are --episodes",
    )
    amp.add_argument("--seeds", "--seed", type=int, nargs="+", default=[0], help="training seeds (default 0)")
    amp.add_argument(
        "--device",
        default=None,
        choices=("cpu", "cuda"),
        help="where both trainings run (default: cuda when there is a GPU)",
    )
    amp.add_argument("--episodes", type=positive_int, default=20, help="evaluation episodes of each trained agent")
    add_cache(amp)
    add_store(amp)


def add_actorq(commands: Subcommands) -> None:
    actorq = commands.add_parser(
        "actorq",
        help="ActorQ: fp32 learner, quantized actors on Ray; speed and reward",
        description="One run from the flags, or every run of --grid (flags given override its settings). "
        "Defaults: dqn, CartPole-v1, int8 actors, 2 actors, 2048,2048,2048.",
    )
    actorq.set_defaults(handler=handler("train:actorq"))
    actorq.add_argument("--grid", type=Path, default=None, help="study file, e.g. zoo_configs/actorq.yaml")
    actorq.add_argument(
        "--algo",
        default=None,
        choices=ACTORQ_ALGOS,
        help="learner: dqn (discrete actions) or td3/ddpg/d4pg (continuous)",
    )
    add_env(actorq, help=ENV_HELP + " (default CartPole-v1, or each env of --grid)")
    config_flag(actorq, ActorQConfig, "actor_precision", alone=False, given_only=True, choices=ACTOR_PRECISIONS)
    custom: dict[str, dict[str, Any]] = {
        "int8_backend": {"choices": ACTOR_INT8_RUNTIMES},
        "learner_device": {"choices": ("cpu", "cuda")},
        "policy_arch": {"type": widths, "nargs": None, "metavar": "W,W,..."},
        "eval_every_s": {"flag": "eval_every"},
        "eval_clock": {"choices": EVAL_CLOCKS},
    }
    for name in FLAG_SETTINGS:  # each said once, in ActorQConfig: its default, its help
        config_flag(actorq, ActorQConfig, name, alone=False, given_only=True, **custom.get(name, {}))
    actorq.add_argument(
        "--seeds",
        "--seed",
        type=int,
        nargs="+",
        default=None,
        help="one run per seed for each precision (the speed-up table's CIs are over seeds)",
    )
    actorq.add_argument("--address", default=None, help="Ray cluster address (default: a local cluster)")
    actorq.add_argument(
        "--concurrent",
        type=positive_int,
        default=None,
        metavar="N",
        help="runs side by side in one Ray cluster (seeds, precisions), at most as many as the cores hold "
        "(default: that many; --plan says how many; 1: one after another)",
    )
    actorq.add_argument(
        "--plan",
        action="store_true",
        help="say what the runs need and what fits on this machine (cores, GPUs, runs side by side, time), run nothing",
    )
    actorq.add_argument(
        "--budget",
        type=non_negative_float,
        default=None,
        metavar="MIN",
        help="with --plan: whether the runs fit this many minutes",
    )
    add_store(actorq)


def add_rollout(commands: Subcommands) -> None:
    rollout = commands.add_parser(
        "rollout",
        help="train PPO/A2C on rollouts played by a quantized policy copy; mismatch and final reward",
        description="Every precision x correction x seed of the flags, each after its fp32-rollout reference run "
        "(or the runs of --grid, filtered by the flags). rl-zoo3's hyperparameters; the behaviour policy is "
        "re-quantized after every update; the trained fp32 policy is evaluated at the end.",
    )
    rollout.set_defaults(handler=handler("train:rollout"))
    rollout.add_argument("--grid", type=Path, default=None, help="study file, e.g. zoo_configs/rollout.yaml")
    rollout.add_argument("--algo", default=None, type=str.lower, choices=ALGOS, help="ppo (default) or a2c")
    add_env(rollout, help=ENV_HELP + " (default: each env of --grid)")
    rollout.add_argument(
        "--rollout-precision",
        nargs="+",
        type=precision_arg,
        default=None,
        metavar="P",
        help=f"behaviour policy precision(s): {help_text()} (default int8)",
    )
    rollout.add_argument(
        "--correction",
        nargs="+",
        choices=ROLLOUT_CORRECTIONS,
        default=None,
        help="none (naive: PPO's ratio against the quantized policy), tis (x min(pi/pi_q, C)), "
        "mis (drop samples outside [1/C, C]); default none",
    )
    config_flag(rollout, RolloutConfig, "cap", alone=False, given_only=True)
    rollout.add_argument("--seeds", "--seed", type=int, nargs="+", default=None, help="training seeds (default 0)")
    add_timesteps(
        rollout, None, "training timesteps, as in rl-zoo3 (default rl-zoo3's); evaluation episodes are --episodes"
    )
    config_flag(
        rollout,
        RolloutConfig,
        "backend",
        alone=False,
        given_only=True,
        flag="rollout_backend",
        choices=ROLLOUT_BACKENDS,
    )
    config_flag(rollout, RolloutConfig, "episodes", alone=False, given_only=True)
    add_executor(rollout, "runs")
    add_cache(rollout, "trained agents")
    add_store(rollout)
    rollout.add_argument("--force", action="store_true", help="train again runs the store already has")


def add_train(commands: Subcommands) -> None:
    train = commands.add_parser("train", help="train an fp32 baseline with rl-zoo3's hyperparameters into the cache")
    train.set_defaults(handler=handler("train:train"))
    train.add_argument("--algo", required=True, choices=ALGOS)
    add_env(train, required=True)
    train.add_argument("--seed", type=int, default=0)
    add_timesteps(train, None, "training timesteps (default: rl-zoo3's budget)")
    train.add_argument(
        "--conf-file", type=Path, default=None, metavar="FILE.yml", help="rl-zoo3 hyperparameters to train with"
    )
    train.add_argument(
        "--hyperparams",
        nargs="+",
        default=(),
        metavar="KEY:VALUE",
        help='override hyperparameters, as rl-zoo3 does (e.g. n_envs:4 policy_kwargs:"dict(net_arch=[64])")',
    )
    train.add_argument(
        "--save-freq",
        type=int,
        default=None,
        metavar="STEPS",
        help="checkpoint every STEPS steps (default: a tenth of the budget; -1: none)",
    )
    train.add_argument("--resume", action="store_true", help="continue an interrupted run from its latest checkpoint")
    add_cache(train)
