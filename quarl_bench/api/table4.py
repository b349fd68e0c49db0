"""QuaRL Table 4: synthetic policies timed per deployment backend on this machine, beside the paper's figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quarl_bench.store import ResultStore


def time_table4(
    policies: Sequence[str],
    backends: Sequence[str],
    calls: int,
    store: ResultStore,
    force: bool = False,
    on_error: Callable[[str, str, str], None] | None = None,
) -> Any:
    """QuaRL Table 4's synthetic policies timed per backend (torch-fp32, the reference, always) on this machine,
    batch 1 on one thread; a timing already stored for this machine and these versions is reused unless ``force``.
    Returns the comparison with the paper's figures (:func:`quarl_bench.report.deployment.table4_comparison`)."""
    import pandas as pd

    from quarl_bench.config import config_dir
    from quarl_bench.deploy.machine import load_record, load_text
    from quarl_bench.deploy.synthetic import machine, time_policy, timing_key
    from quarl_bench.errors import note
    from quarl_bench.report.deployment import table4_comparison
    from quarl_bench.store.provenance import driver_provenance

    store.check()
    host, driver = machine(), driver_provenance()
    if (load := load_record())["busy"]:
        note(f"note: {load_text(load)}: the timings taken now are flagged busy; rerun on a quiet machine")
    keys = []
    for policy in policies:
        for backend in dict.fromkeys(["torch-fp32", *backends]):
            key = timing_key(policy, backend, calls, host, driver["versions"])
            if store.has_timing(key) and not force:
                keys.append(key)
                continue
            try:
                row = time_policy(policy, backend, calls, key, driver | {"host": host})
            except Exception as error:  # noqa: BLE001 - ONNX Runtime, torchao and onnx raise many types
                text = str(error).strip()
                if on_error:
                    on_error(policy, backend, f"{type(error).__name__}: {text.splitlines()[0] if text else ''}")
                continue
            store.put_timing(row, replace=True)
            keys.append(key)
    timings = store.timings()
    paper = pd.read_csv(config_dir() / "paper" / "quarl_table4_deployment.csv")
    return table4_comparison(timings[timings["key"].isin(keys)], paper)
