"""quarl-bench: post-training quantization and evaluation of RL policies (QuaRL / ActorQ)."""

from quarl_bench.errors import QuarlError
from quarl_bench.evaluate import evaluate
from quarl_bench.quant.ptq import quantize
from quarl_bench.store import ResultStore, load_results
from quarl_bench.types import EvalResult, Job, QuantSpec
from quarl_bench.zoo.agents import load_agent, resolve_agent

__all__ = [
    "EvalResult",
    "Job",
    "QuantSpec",
    "QuarlError",
    "ResultStore",
    "evaluate",
    "load_agent",
    "load_results",
    "quantize",
    "resolve_agent",
]
