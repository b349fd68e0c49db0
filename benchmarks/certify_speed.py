"""Certify vs the fixed protocol on ten zoo agents: episodes, wall time, and whether the answer repeats.

For each agent, widths 8 6 5 4 3 2 (fp32 the reference): `certify` at two independent seed bases (0 and 5000),
and the fixed protocol (100 episodes per width at seed 0, the minimum safe width read from the per-width means).
Prints per agent the certified minimum width at both bases, contradictions (a width safe in one run and unsafe in the
other), and the episodes (every one played: fp32 and quantized batches and the scale set) and seconds of each
approach, per median agent and as means with their ratio. Every row lands in one store.
Run: python benchmarks/certify_speed.py [--zoo ../shared/zoo] [--max-episodes 1000] [--store /tmp/certify.sqlite]

With ``--parallel``, instead: a certify grid (default certify_methods, filtered by ``--algo``/``--env``) certified
by the CLI in one process, then on a local pool of ``--workers`` (default 2), then on Ray where ``--ray`` says (a
cluster ADDRESS, or ``local``), each on a fresh store; prints each run's seconds, whether the verdicts (and the
episodes behind each) are identical, and the speed-up of the pool over one process:
    python benchmarks/certify_speed.py --parallel --algo a2c dqn --env CartPole-v1 Acrobot-v1 --max-episodes 300
With ``--parallel --record``, ``quarl-bench record`` itself on those agents (its ladder at certify's defaults), the
same three ways, with each run's plan beside its wall time:
    python benchmarks/certify_speed.py --parallel --record --algo a2c dqn ppo qrdqn --env CartPole-v1 Acrobot-v1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from quarl_bench import AgentQuery, CertifyConfig, QuantSpec, ResultStore, certify_agent, resolve, run_ptq
from quarl_bench.jobs.grids import EvalSettings

AGENTS = (
    ("ppo", "LunarLander-v3"),
    ("a2c", "LunarLander-v3"),
    ("dqn", "LunarLander-v3"),
    ("a2c", "Acrobot-v1"),
    ("ppo", "Acrobot-v1"),
    ("qrdqn", "Acrobot-v1"),
    ("ppo", "Pendulum-v1"),
    ("sac", "Pendulum-v1"),
    ("ddpg", "LunarLanderContinuous-v3"),
    ("dqn", "CartPole-v1"),
)
WIDTHS = ("int8", "int6", "int5", "int4", "int3", "int2")
SEED_BASES = (0, 5000)
FIXED_EPISODES = 100


def fixed_minimum(rows: list[dict], delta: float) -> str | None:
    """The fixed protocol's answer: the narrowest width whose mean, and every wider one's, is within δ of fp32."""
    fp32 = next(r["mean_reward"] for r in rows if r["precision"] == "fp32")
    safe = None
    for width in WIDTHS:
        mean = next(r["mean_reward"] for r in rows if r["precision"] == width)
        if mean < fp32 - delta:
            break
        safe = width
    return safe


def parallel(args: argparse.Namespace) -> None:
    """One grid certified inline, on a pool and (``--ray``) on Ray: seconds, identical verdicts, the ratio."""
    import yaml

    from quarl_bench.config import grid_file

    scratch = Path(tempfile.mkdtemp())
    if args.record:
        parallel_record(args, scratch)
        return
    study = yaml.safe_load(grid_file(args.grid).read_text())
    for line in study["grid"]:  # the grid's own lines, on the agents asked for
        line["algos"] = [a for a in line["algos"] if not args.algo or a in args.algo]
        line["envs"] = [e for e in line["envs"] if not args.env or e in args.env]
    grid = scratch / "grid.yaml"
    grid.write_text(yaml.safe_dump(study))
    command = [str(Path(sys.executable).with_name("quarl-bench")), "certify", "--grid", str(grid), "-f", args.zoo]
    command += ["--max-episodes", str(args.max_episodes), "--json"]
    runs = {"1 process": [], f"pool of {args.workers}": ["--workers", str(args.workers)]}
    if args.ray:
        address = [] if args.ray == "local" else ["--address", args.ray]
        runs[f"ray ({args.ray})"] = ["--executor", "ray", "--workers", str(args.workers), *address]
    answers, seconds = {}, {}
    for number, (name, flags) in enumerate(runs.items()):
        start = time.perf_counter()
        done = subprocess.run(
            [*command, *flags, "--store", str(scratch / f"run{number}.sqlite")], capture_output=True, text=True
        )
        seconds[name] = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{name}: {done.stderr.strip().splitlines()[-1]}")
        answers[name] = [
            (a["agent"], a["agent_hash"], v["precision"], v["verdict"], v["episodes"], v["mean"])
            for line in done.stdout.splitlines()
            if line.startswith("{")
            for a in [json.loads(line)]
            for v in a["verdicts"]
        ]
        verdicts = answers[name]
        print(
            f"{name}: {seconds[name]:.1f} s, {len({v[1] for v in verdicts})} agents, {len(verdicts)} verdicts "
            f"({sum(v[3] == 'safe' for v in verdicts)} safe, {sum(v[3] == 'unsafe' for v in verdicts)} unsafe, "
            f"{sum(v[3] == 'undetermined' for v in verdicts)} undetermined)"
        )
    first = next(iter(answers.values()))
    for name, verdicts in answers.items():
        print(f"{name}: verdicts and episodes identical to 1 process: {verdicts == first}")
    inline, pooled = seconds["1 process"], seconds[f"pool of {args.workers}"]
    print(f"speed-up, pool of {args.workers} over 1 process: {inline / pooled:.2f}x ({inline:.1f} s / {pooled:.1f} s)")


def parallel_record(args: argparse.Namespace, scratch: Path) -> None:
    """``quarl-bench record`` itself (its ladder, its driver) on the agents asked for: in one process, on a pool
    of ``--workers`` and (``--ray``) on Ray, each on a fresh store; each run's seconds and its plan, whether the
    verdicts (question, verdict, pairs, interval) are identical, and the pool's speed-up."""
    import pandas as pd

    command = [str(Path(sys.executable).with_name("quarl-bench")), "record", "-f", args.zoo]
    command += [*(["--algo", *args.algo] if args.algo else []), *(["--env", *args.env] if args.env else [])]
    runs = {"1 process": [], f"pool of {args.workers}": ["--workers", str(args.workers)]}
    if args.ray:
        address = [] if args.ray == "local" else ["--address", args.ray]
        runs[f"ray ({args.ray})"] = ["--executor", "ray", "--workers", str(args.workers), *address]
    answers, seconds = {}, {}
    for number, (name, flags) in enumerate(runs.items()):
        out, start = scratch / f"record{number}", time.perf_counter()
        done = subprocess.run(
            [*command, *flags, "--store", str(scratch / f"run{number}.sqlite"), "--out", str(out)],
            capture_output=True,
            text=True,
        )
        seconds[name] = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{name}: {done.stderr.strip().splitlines()[-1]}")
        tidy = pd.read_csv(out / "record_verdicts.csv").sort_values("question")
        answers[name] = tidy[["question", "verdict", "episodes", "mean", "lower", "upper"]].values.tolist()
        run = json.loads((out / "record_run.json").read_text())
        counts = tidy["verdict"].value_counts()
        print(
            f"{name}: {seconds[name]:.1f} s (plan {run['plan_seconds']:.0f} s, {run['wall_over_plan']:.2f}x), "
            f"{tidy['agent'].nunique()} agents, {len(tidy)} verdicts ("
            + ", ".join(f"{int(n)} {verdict}" for verdict, n in counts.items())
            + f"), {int(tidy['episodes'].sum())} pairs"
        )
    first = next(iter(answers.values()))
    for name, verdicts in answers.items():
        print(f"{name}: verdicts, pairs and intervals identical to 1 process: {verdicts == first}")
    inline = seconds["1 process"]
    for name in list(runs)[1:]:
        print(
            f"speed-up, {name} over 1 process: {inline / seconds[name]:.2f}x ({inline:.1f} s / {seconds[name]:.1f} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--max-episodes", type=int, default=1000)
    parser.add_argument("--store", type=Path, default=Path(tempfile.mkdtemp()) / "certify.sqlite")
    parser.add_argument("--agents", nargs="*", default=None, help="algo/env pairs, e.g. dqn/CartPole-v1")
    parser.add_argument("--parallel", action="store_true", help="a grid inline, on a pool and on Ray: the ratio")
    parser.add_argument("--grid", default="certify_methods", help="--parallel: the certify grid")
    parser.add_argument("--record", action="store_true", help="--parallel: quarl-bench record's ladder, not a grid")
    parser.add_argument("--algo", nargs="*", default=None, help="--parallel: the grid's algos to keep")
    parser.add_argument("--env", nargs="*", default=None, help="--parallel: the grid's envs to keep")
    parser.add_argument("--workers", type=int, default=2, help="--parallel: pool (and Ray) workers")
    parser.add_argument("--ray", default=None, metavar="ADDRESS", help="--parallel: also on Ray (an address or local)")
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.agents, args.max_episodes = ["dqn/CartPole-v1"], 40
    if args.parallel:
        parallel(args)
        return
    torch.set_num_threads(1)
    agents = [tuple(a.split("/")) for a in args.agents] if args.agents else AGENTS
    specs = tuple(QuantSpec(w) for w in WIDTHS)
    totals = {"certify episodes": 0, "certify s": 0.0, "fixed episodes": 0, "fixed s": 0.0}
    agree = contradictions = undetermined = 0
    decided_episodes: list[int] = []
    per_run: list[tuple[int, float]] = []  # (episodes, seconds) of each certify run
    fixed_runs: list[float] = []
    all_zero: list[tuple[int, int, bool]] = []  # (episodes, floor, within 1.5x floor) of widths with all-zero pairs
    with ResultStore(args.store) as store:
        for algo, env in agents:
            ref = resolve(AgentQuery(env, algo, folder=args.zoo, use_hub=False))
            answers, verdicts = [], []
            for base in SEED_BASES:
                config = CertifyConfig(seed=base, max_episodes=args.max_episodes)
                start = time.perf_counter()
                result = certify_agent(ref, specs, config, store)
                seconds = time.perf_counter() - start
                totals["certify s"] += seconds
                # every episode played: the batches behind the verdicts (fp32 and quantized) and the scale set's
                played = {key for v in result.verdicts for key in v.rows} | set(result.scale_rows)
                episodes = sum(store.get(key)["episodes"] for key in played)
                totals["certify episodes"] += episodes
                per_run.append((episodes, seconds))
                answers.append(result.minimum_safe)
                verdicts.append({v.spec: v.verdict for v in result.verdicts})
                decided_episodes += [v.episodes for v in result.verdicts if v.verdict != "undetermined"]
                undetermined += any(v.verdict == "undetermined" for v in result.verdicts) and base == SEED_BASES[0]
                line = " ".join(f"{v.spec}:{v.verdict[0]}{v.episodes}" for v in result.verdicts)
                floor = next((v.evidence.get("minimum_episodes") for v in result.verdicts), None)
                print(
                    f"{algo}/{env} base {base}: minimum {result.minimum_safe} (delta {result.delta:.2f}, "
                    f"{result.guarantee}, floor {floor or '-'}) {line}"
                )
                for v in result.verdicts:  # identical play: decided within 1.5x its floor, rounded up to a batch?
                    if v.evidence.get("nonzero_pairs") == 0 and v.evidence.get("minimum_episodes"):
                        budget = -(-1.5 * v.evidence["minimum_episodes"] // config.batch) * config.batch
                        all_zero.append((v.episodes, v.evidence["minimum_episodes"], v.episodes <= budget))
            both = set(verdicts[0]) & set(verdicts[1])
            clash = sum({verdicts[0][w], verdicts[1][w]} == {"safe", "unsafe"} for w in both)
            contradictions += clash
            agree += answers[0] == answers[1]
            start = time.perf_counter()
            rows = run_ptq(ref, specs, EvalSettings(FIXED_EPISODES, 0), store)
            fixed_runs.append(time.perf_counter() - start)
            totals["fixed s"] += fixed_runs[-1]
            totals["fixed episodes"] += FIXED_EPISODES * (len(WIDTHS) + 1)
            print(
                f"  fixed protocol ({FIXED_EPISODES} episodes per width): minimum {fixed_minimum(rows, result.delta)}"
            )
    runs = len(agents) * len(SEED_BASES)
    print(f"same certified minimum at both seed bases: {agree} of {len(agents)}; contradictions: {contradictions}")
    print(f"agents with an undetermined width (base {SEED_BASES[0]}): {undetermined} of {len(agents)}")
    print(f"median episodes per decided width: {statistics.median(decided_episodes) if decided_episodes else '-'}")
    if all_zero:
        within = sum(ok for _, _, ok in all_zero)
        print(
            f"widths with all-zero differences (finite-sample): {len(all_zero)}, decided within 1.5x their floor "
            f"(rounded up to a batch): {within}; median episodes {statistics.median(e for e, _, _ in all_zero):.0f} "
            f"against a median floor of {statistics.median(f for _, f, _ in all_zero):.0f}"
        )
    print(
        f"certify: {totals['certify episodes'] / runs:.0f} episodes and {totals['certify s'] / runs:.1f} s per agent "
        f"and seed base; fixed protocol: {totals['fixed episodes'] / len(agents):.0f} episodes and "
        f"{totals['fixed s'] / len(agents):.1f} s per agent"
    )
    print(
        f"median agent: certify {statistics.median(e for e, _ in per_run):.0f} episodes and "
        f"{statistics.median(s for _, s in per_run):.1f} s; fixed {FIXED_EPISODES * (len(WIDTHS) + 1)} episodes and "
        f"{statistics.median(fixed_runs):.1f} s"
    )
    print(
        f"ratio fixed / certify: {totals['fixed episodes'] / len(agents) / (totals['certify episodes'] / runs):.2f}x "
        f"episodes, {totals['fixed s'] / len(agents) / (totals['certify s'] / runs):.2f}x wall time (means over agents)"
    )


if __name__ == "__main__":
    main()
