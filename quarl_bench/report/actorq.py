"""ActorQ outputs: the speed-up table (ActorQ Table 2 layout), convergence curves and runtime breakdown bars."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from quarl_bench.actorq.metrics import PHASES, breakdown, learned, learner_bound, reward_target, time_to_reward
from quarl_bench.deploy.machine import load_text
from quarl_bench.report.objects import Figure, Table
from quarl_bench.report.plots import file_label


def actorq_runs(results: pd.DataFrame) -> pd.DataFrame:
    """One row per ActorQ run: setting, seed, precision, speed, energy, curve, mismatch, breakdown."""
    runs = results[results["method"] == "actorq"].sort_values("created_at").drop_duplicates("key", keep="last")
    records = []
    for _, row in runs.iterrows():
        prov = row["provenance"]
        if not prov["actor_steps"] or not prov.get("learner", {}).get("updates", 1):
            continue  # a run that trained nothing (stored before such runs were refused): no speed to compare
        if prov.get("interrupted"):
            continue  # stopped from outside: its curve is kept in the store, but it is no run to time
        phases = breakdown(prov["actors"])
        steps = max(prov["actor_steps"], 1)
        mismatch = prov.get("mismatch") or []
        records.append(
            {
                "setting": row.get("setting") or row["agent_hash"],  # rows stored before the setting column
                "env": row["env_id"],
                "algo": row["algo"],
                "precision": row["precision"],
                "seed": row["seed"],
                "actors": prov["config"]["n_actors"],
                "arch": "x".join(map(str, prov["config"]["policy_arch"])),
                "comm_bits": prov["config"].get("comm_bits", 32),
                "learner_device": learner_label(prov),
                "target_reward": prov["config"].get("target_reward"),
                "steps_per_s": prov["actor_steps_per_s"],
                "curve": prov["curve"],
                "final_reward": row["mean_reward"],
                "joules_per_step": prov["energy"].get("kwh", 0.0) * 3.6e6 / steps
                if prov.get("energy")
                else float("nan"),
                "mismatch": mismatch,
                "broadcast_bytes": prov["broadcast_bytes"],
                "restarts": prov["restarts"],
                "row": row["key"],
                "load": load_text(prov.get("load")) or "not recorded",
                "learner_bound": learner_bound(prov.get("learner", {}), prov["config"].get("samples_per_insert", 0)),
                **phases,
            }
        )
    return pd.DataFrame.from_records(records)


def learner_label(provenance: dict) -> str:
    """Where a run's learner trained: ``cpu``, or ``cuda: NAME`` with the GPU it recorded."""
    device = provenance.get("learner_device", "cpu")
    record = provenance.get("device_record")
    if device == "cuda" and isinstance(record, dict) and record.get("gpu"):
        return f"cuda: {record['gpu']}"
    return device


def _interval(low: float, high: float) -> str:
    return "n/a (1 seed)" if pd.isna(low) else f"[{low:.2f}, {high:.2f}]"


def speedup_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per setting and precision, over seeds: actor steps/s (speed-up with a paired bootstrap 95% CI), time to 95%
    of each seed's fp32 run (95% of the way from its first evaluation to its best; none where that run never beat
    its first evaluation beyond the episodes' spread, or where either run's learner could not keep up), energy per
    actor step, and the time speed-up (:mod:`quarl_bench.statistics.time_to_target`): one target for every seed
    (the runs' ``--target-reward``, else the median of the seeds' 95% targets), each run's crossing interpolated
    between evaluations, runs that never reach it kept as censored, fp32's Kaplan-Meier median time over this
    precision's, its bootstrap interval over seeds, and a verdict (``undetermined`` where the interval holds 1);
    ``caveat`` says why a time is missing."""
    from quarl_bench.report.estimators import paired_ratio_ci
    from quarl_bench.statistics.time_to_target import crossing, median_time, speedup

    rows = []
    # runs whose learners trained on two different devices (two GPUs) are two lines, never one ratio
    for (_setting, env, _device), group in runs.groupby(["setting", "env", "learner_device"]) if len(runs) else []:
        fp32 = group[group["precision"] == "fp32"].set_index("seed")
        targets = {
            seed: reward_target(run["curve"]) if learned(run["curve"]) else None for seed, run in fp32.iterrows()
        }
        common = _common_target(group, targets)
        for precision, runs_at in group.groupby("precision", sort=False):
            runs_at = runs_at.set_index("seed")
            seeds = sorted(set(runs_at.index) & set(targets))
            # a learner-bound pair compares how many updates its learners made, not how fast its actors were
            timed = [s for s in seeds if not (runs_at.loc[s, "learner_bound"] or fp32.loc[s, "learner_bound"])]
            times = {s: time_to_reward(runs_at.loc[s, "curve"], targets[s]) for s in timed}
            base_times = {s: time_to_reward(fp32.loc[s, "curve"], targets[s]) for s in timed}
            reached_times = {s: (base, time) for s in timed if (base := base_times[s]) and (time := times[s])}
            reached = list(reached_times)
            speed, speed_low, speed_high = (
                paired_ratio_ci(runs_at.loc[seeds, "steps_per_s"], fp32.loc[seeds, "steps_per_s"])
                if seeds
                else (float("nan"),) * 3
            )
            theirs = [crossing(fp32.loc[s, "curve"], common) for s in timed] if common is not None else []
            mine = [crossing(runs_at.loc[s, "curve"], common) for s in timed] if common is not None else []
            found = speedup(theirs, mine) if theirs else None
            time_up = found.estimate if found is not None and found.estimate is not None else float("nan")
            time_low, time_high = (found.low, found.high) if found is not None else (float("nan"),) * 2
            median = median_time([c.time for c in mine], [c.reached for c in mine]) if mine else None
            first = runs_at.iloc[0]
            agreement = [p["agreement"] for mismatch in runs_at["mismatch"] for p in mismatch]
            rows.append(
                {
                    "env": env,
                    "algo": first["algo"],
                    "arch": first["arch"],
                    "actors": first["actors"],
                    "precision": precision,
                    "comm bits": first["comm_bits"],
                    "learner": first["learner_device"],
                    "seeds": len(runs_at),
                    "actor steps/s": runs_at["steps_per_s"].mean(),
                    "steps/s speed-up": speed,
                    "steps/s CI": _interval(speed_low, speed_high),
                    "time to 95% (s)": np.mean([times[s] for s in reached]) if reached else None,
                    "seeds reaching": f"{len(reached)}/{len(seeds)}",
                    "target": common,
                    "median time to target (s)": median,
                    "reached target": f"{sum(c.reached for c in mine)}/{len(mine)}" if mine else "-",
                    "time speed-up": time_up,
                    "time CI": _interval(time_low, time_high),
                    "time CI low": time_low,
                    "time CI high": time_high,
                    "CI includes 1": None if pd.isna(time_low) else bool(time_low <= 1.0 <= time_high),
                    "verdict": found.verdict if found is not None else "undetermined",
                    "why": found.why if found is not None else "no target: no fp32 run learned",
                    "J / actor step": runs_at["joules_per_step"].mean(),
                    "mean agreement vs fp32 learner": np.mean(agreement) if agreement else None,
                    "final reward": runs_at["final_reward"].mean(),
                    "broadcast bytes": first["broadcast_bytes"],
                    "load": "; ".join(sorted(set(runs_at["load"]))) if "load" in runs_at else "not recorded",
                    "caveat": _caveat(runs_at, fp32, targets),
                    "rows": ", ".join(runs_at["row"]),
                }
            )
    return pd.DataFrame(rows)


def _common_target(group: pd.DataFrame, targets: dict[int, float | None]) -> float | None:
    """The one target every seed's runs are timed to: their ``--target-reward`` where set, else the median of the
    fp32 runs' own 95% targets (None where no fp32 run learned)."""
    given = group["target_reward"].dropna() if "target_reward" in group else pd.Series(dtype=float)
    if len(given):
        return float(given.iloc[0])
    found = [t for t in targets.values() if t is not None]
    return float(np.median(found)) if found else None


def _caveat(runs_at: pd.DataFrame, fp32: pd.DataFrame, targets: dict[int, float | None]) -> str:
    """Why a row has no time to reward: an fp32 run that never learned, or a learner (this row's or its fp32
    pair's) that could not keep up."""
    said = [f"the fp32 run of seed {seed} never beat its first evaluation" for seed, t in targets.items() if t is None]
    said += [f"seed {seed}: {text}" for seed, text in runs_at["learner_bound"].items() if text]
    if (runs_at["precision"] != "fp32").all():
        said += [f"seed {seed}'s fp32 run: {text}" for seed, text in fp32["learner_bound"].items() if text]
    return "; ".join(said)


def paper_env_id(task: str, suite: str) -> str:
    """The env id a row of ActorQ's Table 2 names: ``Cartpole Balance`` (dm_control) -> ``dmc/cartpole-balance-v0``,
    ``CartPole`` (gym) -> ``CartPole-v1``."""
    from quarl_bench.config import alias_env_id
    from quarl_bench.zoo.ids import DMC_PREFIX

    if suite == "dm_control":
        return f"{DMC_PREFIX}{task.lower().replace(' ', '-')}-v0"
    return alias_env_id(task)


PAPER_COLUMNS = ("paper algo", "paper target", "paper time to target (s)", "paper speed-up")


def with_paper(table: pd.DataFrame, paper: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """``table`` (speedup_table) with ActorQ Table 2's time to target and speed-up for the same env and precision
    (the paper's algo and target named; blank where the paper has no such task), and with ``runs`` (actorq_runs),
    how many of our seeds reached the paper's own target and when: the paper's measure, on our runs."""
    if table.empty or paper.empty:
        return table
    published = {paper_env_id(row["task"], row["suite"]): row for _, row in paper.iterrows()}
    if runs is not None:
        table = table.join(_reaching_paper_target(table, runs, published))

    def columns(env: str, precision: str) -> dict[str, object]:
        entry = published.get(env)
        if entry is None:
            return {}
        speedup = 1.0 if precision == "fp32" else entry[f"{precision}_speedup"]
        return dict(
            zip(
                PAPER_COLUMNS,
                (entry["algo"], entry["reward_target"], entry[f"{precision}_time_s"], speedup),
                strict=True,
            )
        )

    found = [columns(env, precision) for env, precision in zip(table["env"], table["precision"], strict=True)]
    return table.join(pd.DataFrame(found, index=table.index, columns=list(PAPER_COLUMNS)))


def _reaching_paper_target(table: pd.DataFrame, runs: pd.DataFrame, published: dict) -> pd.DataFrame:
    rows = []
    for env, precision in zip(table["env"], table["precision"], strict=True):
        entry = published.get(env)
        curves = runs[(runs["env"] == env) & (runs["precision"] == precision)]["curve"]
        times = [time_to_reward(curve, entry["reward_target"]) for curve in curves] if entry is not None else []
        reached = [t for t in times if t is not None]
        rows.append(
            {
                "seeds reaching paper target": f"{len(reached)}/{len(times)}" if entry is not None else None,
                "time to paper target (s)": float(np.mean(reached)) if reached else None,
            }
        )
    return pd.DataFrame(rows, index=table.index)


PAPER_TABLE = "ActorQ Table 2"


def actorq_paper_cells(results: pd.DataFrame, paper_dir: Path | None) -> pd.DataFrame:
    """Every published cell of ActorQ Table 2 (per task: fp32's time to target, then the fp16 and int8 speed-ups)
    with what this store measured for it and a status (the paper page's): *reproduced* or *outside* as the paper's
    speed-up lies in our time speed-up's CI over seeds or not, *undetermined* where there is no such CI (one seed,
    no time to reward: the ``caveat`` says why), *reference* for a measured fp32 run, *not measured* without a run."""
    path = paper_dir / "actorq_table2.csv" if paper_dir is not None else None
    if path is None or not path.is_file():
        return pd.DataFrame()
    runs = actorq_runs(results) if len(results) else pd.DataFrame()
    table = speedup_table(runs) if len(runs) else pd.DataFrame(columns=["env", "precision"])
    rows = []
    for _, entry in pd.read_csv(path).iterrows():
        env = paper_env_id(entry["task"], entry["suite"])
        for precision in ("fp32", "fp16", "int8"):
            cell = {
                "table": PAPER_TABLE,
                "algo": entry["algo"],
                "env": env,
                "precision": precision,
                "paper time to target (s)": entry[f"{precision}_time_s"],
                "paper speed-up": 1.0 if precision == "fp32" else entry[f"{precision}_speedup"],
            }
            ours = table[(table["env"] == env) & (table["precision"] == precision)]
            if ours.empty:
                why = f"no actorq run of {env} with {precision} actors in this store"
                rows.append(cell | {"status": "not measured", "why": why})
                continue
            line = ours.iloc[0]
            cell |= {
                "time to 95% (s)": line["time to 95% (s)"],
                "time speed-up": line["time speed-up"],
                "time CI": line["time CI"],
                "actor steps/s speed-up": line["steps/s speed-up"],
                "seeds": line["seeds"],
                "rows": line["rows"],
            }
            rows.append(cell | _paper_status(line, precision, cell["paper speed-up"]))
    return pd.DataFrame(rows)


def _paper_status(line: pd.Series, precision: str, paper_speedup: float) -> dict[str, str]:
    if precision == "fp32":
        return {"status": "reference", "why": line["caveat"]}
    if pd.isna(line["time speed-up"]):
        return {"status": "undetermined", "why": line["caveat"] or "no seed's pair reached 95% of its fp32 run's best"}
    low, high = line["time CI low"], line["time CI high"]
    if pd.isna(low):
        return {"status": "undetermined", "why": "one seed: no CI over seeds"}
    return {"status": "reproduced" if low <= paper_speedup <= high else "outside", "why": line["caveat"]}


def actorq_report(results: pd.DataFrame, paper_dir: Path | None = None) -> list[Table | Figure]:
    """``actorq_speedup`` (ours next to ActorQ Table 2 where it has the task) and one figure per setting."""
    runs = actorq_runs(results)
    if runs.empty:
        return []
    paper_file = paper_dir / "actorq_table2.csv" if paper_dir is not None else None
    paper = pd.read_csv(paper_file) if paper_file is not None and paper_file.is_file() else pd.DataFrame()
    items: list[Table | Figure] = [Table("actorq_speedup", "ActorQ", with_paper(speedup_table(runs), paper, runs))]
    for setting, group in runs.groupby("setting"):
        name = f"actorq_{file_label(group['env'].iloc[0])}_{setting}"
        items.append(Figure(name, "ActorQ", draw_actorq, (group,), 110, tuple(group["row"])))
    return items


def draw_actorq(group: pd.DataFrame) -> plt.Figure:
    """Convergence curves, policy mismatch at each pull, and the actors' runtime breakdown of one setting."""
    fig, (curves, mismatch, bars) = plt.subplots(1, 3, figsize=(17, 4))
    for _, run in group.iterrows():
        curve = pd.DataFrame(run["curve"])
        label = f"{run['precision']} actors, seed {run['seed']}"
        curves.plot(curve["seconds"], curve["reward"], marker=".", label=label)
        if run["mismatch"]:
            points = pd.DataFrame(run["mismatch"]).sort_values("seconds")
            mismatch.plot(points["seconds"], points["agreement"], marker=".", linestyle="", label=label)
    mismatch.set_xlabel("wall-clock time (s)")
    mismatch.set_ylabel("actor vs learner fp32: agreement")
    mismatch.set_ylim(-0.02, 1.02)
    mismatch.set_title("policy mismatch at each pull")
    mismatch.legend(fontsize="small")
    curves.set_xlabel("wall-clock time (s)")
    curves.set_ylabel("learner reward (deterministic fp32 policy)")
    curves.set_title(f"{group['env'].iloc[0]}: convergence")
    curves.legend()
    bottom = [0.0] * len(group)
    labels = [f"{p} s{seed}" for p, seed in zip(group["precision"], group["seed"], strict=True)]
    for phase in PHASES:
        values = list(group[phase])
        bars.bar(labels, values, bottom=bottom, label=phase)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    bars.set_ylabel("seconds, summed over actors")
    bars.set_title("actor runtime breakdown")
    bars.legend(fontsize="small")
    fig.tight_layout()
    return fig
