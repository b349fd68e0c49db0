"""``quarl-bench`` commands: one function per command, each parsing nothing and rendering through
``report.console``; grouped as the parsers are (``parsers/``). The CLI looks a command up here by its name."""

from quarl_bench.commands.deploy import deploy, export, table4
from quarl_bench.commands.evaluate import certify, fidelity, mixed, run, sensitivity
from quarl_bench.commands.read import report, results
from quarl_bench.commands.sweep import sweep
from quarl_bench.commands.train import actorq, amp, qat, rollout, train

__all__ = [
    "actorq",
    "amp",
    "certify",
    "deploy",
    "export",
    "fidelity",
    "mixed",
    "qat",
    "report",
    "results",
    "rollout",
    "run",
    "sensitivity",
    "sweep",
    "table4",
    "train",
]
