"""ActorQ outputs: the speed-up table (ActorQ Table 2 layout), convergence curves and runtime breakdown bars."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from quarl_bench.actorq.metrics import PHASES, breakdown, reward_target, time_to_reward  # noqa: E402
from quarl_bench.report.plots import file_label, save_figure  # noqa: E402
from quarl_bench.report.tables import write_table  # noqa: E402


def actorq_runs(results: pd.DataFrame) -> pd.DataFrame:
    """One row per ActorQ run: setting (run key), precision, speed, curve, breakdown."""
    runs = results[results["method"] == "actorq"].sort_values("created_at").drop_duplicates("key", keep="last")
    records = []
    for _, row in runs.iterrows():
        prov = row["provenance"]
        phases = breakdown(prov["actors"])
        records.append({
            "setting": row["agent_hash"], "env": row["env_id"], "algo": row["algo"], "precision": row["precision"],
            "actors": prov["config"]["n_actors"], "arch": "x".join(map(str, prov["config"]["policy_arch"])),
            "steps_per_s": prov["actor_steps_per_s"], "curve": prov["curve"], "final_reward": row["mean_reward"],
            "broadcast_bytes": prov["broadcast_bytes"], "restarts": prov["restarts"], **phases,
        })  # fmt: skip
    return pd.DataFrame.from_records(records)


def speedup_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per setting and precision: actor steps/s, time to 95% of the fp32 run's best reward, speed-ups over fp32."""
    rows = []
    for (_setting, env), group in runs.groupby(["setting", "env"]) if len(runs) else []:
        fp32 = group[group["precision"] == "fp32"]
        target = reward_target(fp32["curve"].iloc[0]) if len(fp32) else None
        base_speed = fp32["steps_per_s"].iloc[0] if len(fp32) else None
        base_time = time_to_reward(fp32["curve"].iloc[0], target) if len(fp32) else None
        for _, run in group.iterrows():
            reached = time_to_reward(run["curve"], target) if target is not None else None
            rows.append({
                "env": env, "algo": run["algo"], "arch": run["arch"], "actors": run["actors"], "precision": run["precision"],
                "actor steps/s": run["steps_per_s"],
                "steps/s speed-up": run["steps_per_s"] / base_speed if base_speed else None,
                "time to 95% (s)": reached,
                "time speed-up": base_time / reached if base_time and reached else None,
                "final reward": run["final_reward"], "broadcast bytes": run["broadcast_bytes"],
            })  # fmt: skip
    return pd.DataFrame(rows)


def paper_env_id(task: str, suite: str) -> str:
    """The env id a row of ActorQ's Table 2 names: ``Cartpole Balance`` (dm_control) -> ``dmc/cartpole-balance-v0``,
    ``CartPole`` (gym) -> ``CartPole-v1``."""
    from quarl_bench.config import alias_env_id

    if suite == "dm_control":
        return f"dmc/{task.lower().replace(' ', '-')}-v0"
    return alias_env_id(task)


def with_paper(table: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """``table`` (speedup_table) with ActorQ Table 2's time to target and speed-up for the same env and precision
    (the paper's algo and target named; blank where the paper has no such task)."""
    if table.empty or paper.empty:
        return table
    published = {paper_env_id(row["task"], row["suite"]): row for _, row in paper.iterrows()}
    columns: dict[str, list] = {"paper algo": [], "paper target": [], "paper time to target (s)": [],
                                "paper speed-up": []}  # fmt: skip
    for _, row in table.iterrows():
        entry = published.get(row["env"])
        precision = row["precision"]
        columns["paper algo"].append(entry["algo"] if entry is not None else None)
        columns["paper target"].append(entry["reward_target"] if entry is not None else None)
        columns["paper time to target (s)"].append(entry[f"{precision}_time_s"] if entry is not None else None)
        speedup = 1.0 if precision == "fp32" else (entry[f"{precision}_speedup"] if entry is not None else None)
        columns["paper speed-up"].append(speedup if entry is not None else None)
    return table.assign(**columns)


def write_actorq_report(results: pd.DataFrame, out_dir: Path, paper_dir: Path | None = None) -> list[Path]:
    """``actorq_speedup.{md,csv}`` (ours next to ActorQ Table 2 where it has the task) and one figure per setting."""
    runs = actorq_runs(results)
    if runs.empty:
        return []
    paper_file = paper_dir / "actorq_table2.csv" if paper_dir is not None else None
    paper = pd.read_csv(paper_file) if paper_file is not None and paper_file.is_file() else pd.DataFrame()
    paths = write_table(with_paper(speedup_table(runs), paper), out_dir, "actorq_speedup")
    for setting, group in runs.groupby("setting"):
        fig, (curves, bars) = plt.subplots(1, 2, figsize=(12, 4))
        for _, run in group.iterrows():
            curve = pd.DataFrame(run["curve"])
            curves.plot(curve["seconds"], curve["reward"], marker=".", label=f"{run['precision']} actors")
        curves.set_xlabel("wall-clock time (s)")
        curves.set_ylabel("learner reward (deterministic fp32 policy)")
        curves.set_title(f"{group['env'].iloc[0]}: convergence")
        curves.legend()
        bottom = [0.0] * len(group)
        labels = list(group["precision"])
        for phase in PHASES:
            values = list(group[phase])
            bars.bar(labels, values, bottom=bottom, label=phase)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        bars.set_ylabel("seconds, summed over actors")
        bars.set_title("actor runtime breakdown")
        bars.legend(fontsize="small")
        fig.tight_layout()
        paths += save_figure(fig, out_dir / f"actorq_{file_label(group['env'].iloc[0])}_{setting}", dpi=110)
    return paths
