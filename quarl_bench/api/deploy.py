"""Real artifacts: deploy (play, time, weigh), export, and QuaRL Table 4's timings."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from quarl_bench.errors import QuarlError
from quarl_bench.types import AgentRef, QuantSpec


def run_deploy(
    ref: AgentRef,
    specs: tuple[QuantSpec, ...],
    settings: Any,
    store: Any,
    force: bool = False,
    on_result: Callable[[dict[str, Any], bool], None] | None = None,
    on_error: Callable[[str, str], None] | None = None,
) -> list[dict[str, Any]]:
    """Build, play, time and weigh each deployment backend's artifact (torch-fp32, the reference, always); a
    backend that cannot run here is reported through ``on_error(backend, reason)`` and the others still run."""
    from quarl_bench.methods.deploy import DeployConfig
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.runner import run_work
    from quarl_bench.work import Work

    store.check()
    driver = driver_provenance()
    rows: dict[str, dict[str, Any]] = {}
    for spec in specs:
        work = Work(DeployConfig(ref, (spec,)), settings, driver=driver)
        try:
            for row in run_work(work, store, force, on_result):
                rows[row["key"]] = row
        except Exception as error:  # noqa: BLE001 - ONNX Runtime, torchao and onnx raise many types
            text = str(error).strip()
            if on_error:
                on_error(spec.backend, f"{type(error).__name__}: {text.splitlines()[0] if text else ''}")
    return list(rows.values())


def export_artifact(ref: AgentRef, spec: QuantSpec, out: Path) -> tuple[Any, Path]:
    """Write ``spec.backend``'s artifact of the agent to ``out`` and a README beside it, each whole or not at all.

    :raises QuarlError: for an unwritable path or a backend with no standalone format.
    """
    from quarl_bench.deploy.artifact_readme import artifact_readme
    from quarl_bench.deploy.backends import build
    from quarl_bench.deploy.export import deployable, split_normalizer
    from quarl_bench.methods.deploy import CALIBRATION_SEED_OFFSET, deploy_calibration_states
    from quarl_bench.zoo.agents import load_agent

    if out.is_dir() or not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
        raise QuarlError(f"cannot write {str(out)!r}: expected a file path in an existing, writable folder")
    agent = load_agent(ref)
    env = agent.make_env(1, 0)
    raw, normalizer = split_normalizer(env)
    module = deployable(agent.model.policy, raw.observation_space, normalizer)
    env.close()
    calibration = (
        deploy_calibration_states(agent, spec.calibration_states, CALIBRATION_SEED_OFFSET)
        if spec.calibration_states
        else None
    )
    sample = (
        calibration[:1] if calibration is not None else deploy_calibration_states(agent, 1, CALIBRATION_SEED_OFFSET)
    )
    artifact = build(spec.backend, module, sample, calibration, spec.calibration_method or "minmax")
    if not artifact.standalone:
        raise QuarlError(
            f"backend {spec.backend} has no standalone artifact format: expected an ort-* or torch-fp32 backend"
        )
    readme = out.with_name(out.name + ".README.md")
    text = artifact_readme(artifact, ref, module, raw.observation_space, out.name, spec)
    for path, data in ((out, artifact.data), (readme, text.encode())):  # each written whole, then renamed
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(data)
        os.replace(partial, path)
    return artifact, readme


def time_table4(
    policies: Sequence[str],
    backends: Sequence[str],
    calls: int,
    store: Any,
    force: bool = False,
    on_error: Callable[[str, str, str], None] | None = None,
) -> Any:
    """QuaRL Table 4's synthetic policies timed per backend (torch-fp32, the reference, always) on this machine,
    batch 1 on one thread; a timing already stored for this machine and these versions is reused unless ``force``.
    Returns the comparison with the paper's figures (:func:`quarl_bench.report.deployment.table4_comparison`)."""
    import pandas as pd

    from quarl_bench.config import config_dir
    from quarl_bench.deploy.synthetic import machine, time_policy, timing_key
    from quarl_bench.provenance import driver_provenance
    from quarl_bench.report.deployment import table4_comparison

    store.check()
    host, driver = machine(), driver_provenance()
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
