"""Deployment outputs: per agent x backend (real artifacts) next to the PTQ simulation of the same precision, and
a latency-vs-reward figure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd

from quarl_bench.deploy.machine import load_text
from quarl_bench.deploy.targets import BACKENDS
from quarl_bench.report.objects import Figure, Table
from quarl_bench.report.plots import file_label
from quarl_bench.store.question import sibling_question, with_questions
from quarl_bench.types import QuantSpec


def fp32_file_of(backend: str) -> str:
    """The fp32 artifact a backend's file size is compared with: the same runtime's fp32 file."""
    return "ort-fp32" if backend.startswith("ort-") else "torch-fp32"


def deployment_table(deployed: pd.DataFrame, simulated: pd.DataFrame) -> pd.DataFrame:
    """One row per deployed artifact (``select(Variant("deploy"))``), with its speed-up over the torch-fp32 reference
    row, its file size against the same runtime's fp32 file (``size base``; below 1 the file grew), and
    the PTQ row of the same agent, precision, seed and episodes (``select(Variant())``): simulated vs real."""
    records = []
    deployed = with_questions(deployed) if len(deployed) else deployed
    simulated = with_questions(simulated, over=()) if len(simulated) else simulated
    for reference_key, cell in deployed.groupby("reference_key") if len(deployed) else []:
        reference = cell[cell["key"] == reference_key]
        if reference.empty:
            continue
        base = reference.iloc[0]["provenance"]["deployment"]
        file_bytes = {r["backend"]: r["provenance"]["deployment"]["artifact_bytes"] for _, r in cell.iterrows()}
        for _, row in cell.iterrows():
            deployment = row["provenance"]["deployment"]
            latency = deployment["latency"]
            # the same job simulated: PTQ at the artifact's precision, every other field the same
            simulation = sibling_question(row, "ptq", QuantSpec(row["precision"]), over=())
            ptq = simulated[simulated["question"] == simulation] if len(simulated) else simulated
            records.append(
                {
                    "algo": row["algo"],
                    "env": row["env_id"],
                    "agent": row["agent_hash"],
                    "condition": row["question label"],
                    "cell": reference_key,
                    "backend": row["backend"],
                    "precision": row["precision"],
                    "reward": row["mean_reward"],
                    "std": row["std_reward"],
                    "E %": row["error_pct"],
                    # discrete: share of equal actions; continuous: the action error, % of the action range
                    "agreement": row["agreement"].get("action_agreement"),
                    "action error % range": _percent(row["agreement"].get("action_range_error")),
                    "p50 ms": latency["p50_ms"],
                    "p99 ms": latency["p99_ms"],
                    "batch64 obs/s": latency.get("batch64_obs_per_s"),
                    "bytes": deployment["artifact_bytes"],
                    "peak MB": deployment["peak_rss_mb"],
                    # timings of two CPU kinds (VNNI, AVX2) are not one ratio: split, never averaged
                    "speed-up": base["latency"]["p50_ms"] / latency["p50_ms"]
                    if int8_cpu(base) == int8_cpu(deployment)
                    else float("nan"),
                    "int8 CPU": int8_cpu(deployment),
                    # like with like: an ONNX file against the fp32 ONNX file, TorchScript against TorchScript
                    "size base": (size_base := fp32_file_of(row["backend"])),
                    "size ratio": file_bytes[size_base] / deployment["artifact_bytes"]
                    if size_base in file_bytes
                    else float("nan"),
                    "PTQ reward (simulated)": ptq["mean_reward"].iloc[0] if len(ptq) else float("nan"),
                    "PTQ E % (simulated)": ptq["error_pct"].iloc[0] if len(ptq) else float("nan"),
                    "real - simulated reward": row["mean_reward"] - ptq["mean_reward"].iloc[0]
                    if len(ptq)
                    else float("nan"),
                    "row key": row["key"],
                }
            )
    return pd.DataFrame.from_records(records)


def deployment_report(table: pd.DataFrame) -> list[Table | Figure]:
    """``deployment`` and one figure (p50 latency vs reward) per agent."""
    if table.empty:
        return []
    items: list[Table | Figure] = [Table("deployment", "Deployment", table)]
    for number, (_cell, group) in enumerate(table.groupby("cell", sort=False)):  # one torch-fp32 reference each
        algo, env, agent = group["algo"].iloc[0], group["env"].iloc[0], group["agent"].iloc[0]
        name = f"deployment_{algo}_{file_label(env)}_{agent[:8]}" + (f"_{number}" if number else "")
        items.append(Figure(name, "Deployment", draw_deployment, (algo, env, group), 110, tuple(group["row key"])))
    return items


def draw_deployment(algo: str, env: str, group: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 4))
    for _, row in group.iterrows():
        fp32 = row["backend"] == "torch-fp32"
        ax.errorbar(
            row["p50 ms"],
            row["reward"],
            yerr=row["std"],
            marker="*" if fp32 else "o",
            markersize=12 if fp32 else 6,
            capsize=3,
            label=row["backend"],
        )
    ax.set_xscale("log")
    ax.set_xlabel("batch-1 latency, p50 (ms, one thread)")
    ax.set_ylabel("mean episode reward (± std)")
    ax.set_title(f"{algo.upper()} {env}: deployed artifacts (★ fp32 reference)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def int8_cpu(deployment: dict) -> str:
    """A deploy row's CPU kind and int8 features (``x86-vnni: avx2 avx512_vnni``), or 'not recorded'."""
    machine = deployment.get("machine")
    if not machine:
        return "not recorded"
    return f"{machine['cpu_kind']}: {' '.join(machine['int8_features'])}"


def table4_comparison(timings: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """QuaRL Table 4 next to ours: per policy and machine, the paper's RasPi fp32/int8 ms and speed-up, our torch
    fp32 and best int8 backend (p50, one thread), its size ratio against the same runtime's fp32 file (``size base``),
    peak memory, and the
    keys of the stored timing rows each figure comes from."""
    nothing = pd.Series(
        {"p50_ms": float("nan"), "artifact_bytes": float("nan"), "peak_rss_mb": float("nan"), "key": None},
        name="none ran",
    )
    published = paper.set_index("policy")
    records = []
    for (machine, calls, policy), cell in timings.groupby(["machine", "calls", "policy"]) if len(timings) else []:
        by_backend = cell.set_index("backend")
        if "torch-fp32" not in by_backend.index:
            continue
        fp32 = by_backend.loc["torch-fp32"]
        int8 = by_backend[by_backend.index.isin(BACKENDS.names(precision="int8"))]
        best = int8.loc[int8["p50_ms"].idxmin()] if len(int8) else nothing
        # like with like: the fastest int8 file against its own runtime's fp32 file
        base_name = fp32_file_of(str(best.name)) if best.name in by_backend.index else "ort-fp32"
        size_base = by_backend.loc[base_name] if base_name in by_backend.index else nothing
        pub = published.reindex([f"Policy {policy}"]).iloc[0]  # all NaN when the paper has no such policy
        provenances = cell.get("provenance", [])  # frames without provenance: no load to show
        loads = [load_text(p.get("load")) for p in provenances if isinstance(p, dict)]
        records.append(
            {
                "policy": f"Policy {policy}",
                "hidden": "-".join(map(str, fp32["hidden"])),
                "paper fp32 ms": pub["fp32_ms"],
                "paper int8 ms": pub["int8_ms"],
                "paper speed-up": pub["speedup"],
                "paper machine": pub["device"] if isinstance(pub["device"], str) else "",
                "fp32 ms": fp32["p50_ms"],
                "int8 ms": best["p50_ms"],
                "int8 backend": best.name,
                "speed-up": fp32["p50_ms"] / best["p50_ms"],
                "vs ORT fp32": (by_backend.loc["ort-fp32"]["p50_ms"] if "ort-fp32" in by_backend.index else math.nan)
                / best["p50_ms"],
                "size ratio": size_base["artifact_bytes"] / best["artifact_bytes"],
                "fp32 peak MB": size_base["peak_rss_mb"],
                "int8 peak MB": best["peak_rss_mb"],
                "machine": f"{machine} (1 thread, batch 1, {calls} calls)",
                "load": "; ".join(sorted({text for text in loads if text})) or "not recorded",
                "busy": any("(busy)" in text for text in loads),
                "size base": size_base.name,
                "rows": ", ".join(
                    k for k in dict.fromkeys((fp32["key"], size_base["key"], best["key"])) if isinstance(k, str)
                ),
            }
        )
    return pd.DataFrame.from_records(records)


def table4_report(comparison: pd.DataFrame, timings: pd.DataFrame) -> list[Table]:
    """``table4`` (the paper next to ours) and ``table4_backends`` (every stored timing row)."""
    if timings.empty:
        return []
    columns = [
        "policy",
        "backend",
        "p50_ms",
        "p99_ms",
        "batch64_obs_per_s",
        "artifact_bytes",
        "peak_rss_mb",
        "machine",
        "calls",
        "key",
    ]
    timings = timings.assign(
        load=[load_text(p.get("load")) if isinstance(p, dict) else "" for p in timings["provenance"]]
    )
    columns.insert(-2, "load")
    return [
        Table("table4", SECTION_TABLE4, comparison, TABLE4_CAPTION, decimals=3, console=True),
        Table("table4_backends", SECTION_TABLE4, timings[columns], decimals=3, on_page=False),
    ]


SECTION_TABLE4 = "QuaRL Table 4: deployment latency"
TABLE4_CAPTION = (
    "QuaRL Table 4: the paper's RasPi-3b+ (4x ARM A53) next to this machine; fp32 = torch fp32, int8 = the fastest "
    "int8 backend, p50 ms"
)


def _percent(share: float | None) -> float | None:
    return None if share is None else 100 * share
