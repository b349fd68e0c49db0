"""Commands that build, time and weigh real low-precision artifacts: deploy, export, table4."""

from __future__ import annotations

from pathlib import Path

from quarl_bench.certify.config import EXPORT_MAX_EPISODES
from quarl_bench.deploy.targets import BACKENDS
from quarl_bench.parsers import Subcommands, handler
from quarl_bench.parsers.arguments import (
    add_agent,
    add_calibration,
    add_certification,
    add_evaluation,
    add_store,
    positive_int,
)


def add_deploy(commands: Subcommands) -> None:
    deploy = commands.add_parser("deploy", help="build real fp16/int8 artifacts of an agent, play, time and weigh them")
    deploy.set_defaults(handler=handler("deploy:deploy"))
    add_agent(deploy, hub=False)
    deploy.add_argument(
        "--backend",
        nargs="+",
        choices=BACKENDS.names(),
        metavar="B",
        default=["ort-fp32", "ort-fp16", "ort-int8-dynamic", "ort-int8-static"],
        help=f"one or more of {', '.join(BACKENDS.names())} (torch-fp32, the reference, always runs)",
    )
    add_calibration(deploy)
    add_evaluation(deploy, "backend")


def add_export(commands: Subcommands) -> None:
    export = commands.add_parser(
        "export",
        help="write one backend's artifact of an agent (a folder with policy.json), gated on parity and certified",
    )
    export.set_defaults(handler=handler("deploy:export"))
    add_agent(export, hub=False)
    export.add_argument(
        "--backend", required=True, choices=BACKENDS.names(), metavar="B", help=f"one of {', '.join(BACKENDS.names())}"
    )
    add_calibration(export)
    export.add_argument(
        "--out", type=Path, required=True, help="artifact folder to write (new or empty), e.g. policy-c-int8/"
    )
    export.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    export.add_argument(
        "--allow-divergent",
        action="store_true",
        help="write the artifact even when it fails the parity gate (policy.json records it)",
    )
    export.add_argument(
        "--max-episodes",
        type=positive_int,
        default=EXPORT_MAX_EPISODES,
        help="paired episodes after which the closed-loop certification is undetermined (default %(default)s)",
    )
    export.add_argument(
        "--allow-degraded",
        action="store_true",
        help="write the artifact even when it is certified worse than fp32 by more than the tolerance",
    )
    export.add_argument("--seed", type=int, default=0, help="the certification's seed base (default %(default)s)")
    export.add_argument(
        "--c-prefix",
        default="",
        metavar="NAME",
        help="c-int8: name the entry point NAME_act and the macros NAME_* (upper case), so two policies link into "
        "one image (default: quarl_policy_act, QUARL_*)",
    )
    add_certification(export, outcomes=("outcome", "success", "progress", "perturb"))
    add_store(export)


def add_table4(commands: Subcommands) -> None:
    table4 = commands.add_parser("table4", help="QuaRL Table 4: time synthetic policies I-III per backend, store it")
    table4.set_defaults(handler=handler("deploy:table4"))
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
        choices=BACKENDS.names(),
        metavar="B",
        default=["ort-fp32", "ort-fp16", "ort-int8-dynamic", "ort-int8-static", "torchao-int8"],
        help=f"one or more of {', '.join(BACKENDS.names())} (torch-fp32, the reference, always runs)",
    )
    table4.add_argument("--calls", type=positive_int, default=1000, help="timed batch-1 calls (default %(default)s)")
    add_store(table4)
    table4.add_argument("--force", action="store_true", help="time again what the store already has")


def add_verify(commands: Subcommands) -> None:
    verify = commands.add_parser(
        "verify", help="replay an exported artifact's test vectors on this machine and check them against its gate"
    )
    verify.set_defaults(handler=handler("deploy:verify"))
    verify.add_argument("folder", type=Path, help="an artifact folder written by export (policy.json, check.py)")
    verify.add_argument(
        "--emulate",
        choices=("exact", "avx2"),
        default="",
        help="ort-* artifacts: play the graph in numpy with this x86 kernel's int8 arithmetic (avx2: ORT's "
        "u8 x s8 kernel without VNNI, whose int16 pair sums saturate) instead of the runtime present",
    )
