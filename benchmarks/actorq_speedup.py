"""ActorQ: DQN CartPole-v1 with a 2048x2048x2048 policy, fp32 vs int8 actors, same settings, one run per seed.

Prints its configuration (cores, actors, learner device) first, then per seed and precision the actor env-steps
per second and time to 95% of that seed's fp32 run (95% of the way from its first evaluation to its best), with
the learner's side (updates, ms per update, achieved samples per insert) and the actors' time blocked in push;
last, the speed-ups with paired bootstrap 95% CIs over seeds (goals here: actor steps/s >= 3x, time-to-95% >= 1.3x
with a CI that excludes 1), from the same table `quarl-bench report` writes.
Run: python benchmarks/actorq_speedup.py [--seeds 3] [--n-actors 1] [--seconds 360] [--eval-every 15]
     [--learner-device cuda] [--store results/quarl.sqlite]
Each run gets the same wall-clock budget. One torch thread per process: on a 2-core machine one actor and the
learner's training thread fill the cores.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from quarl_bench import ActorQConfig, ResultStore, run_actorq
from quarl_bench.actorq.driver import actorq_result, degenerate
from quarl_bench.actorq.metrics import breakdown
from quarl_bench.report.actorq import actorq_runs, speedup_table
from quarl_bench.zoo.devices import training_device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1")
    parser.add_argument("--n-actors", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=360.0, help="wall-clock budget per run")
    parser.add_argument("--arch", default="2048,2048,2048")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--eval-every", type=float, default=15.0, help="seconds between learner evaluations")
    parser.add_argument("--learner-device", default=None, choices=("cpu", "cuda"))
    parser.add_argument("--store", type=Path, default=Path("results/quarl.sqlite"))
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    steps = 10**9  # the wall-clock budget ends a run
    if args.quick:  # bounded by steps, not seconds: on a loaded machine a 4 s run may train nothing
        args.seeds, args.seconds, args.arch, args.eval_every, steps = 1, 60.0, "64,64", 1.0, 2000
        args.store = Path(tempfile.mkdtemp()) / "actorq.sqlite"
    arch = tuple(int(w) for w in args.arch.split(","))
    device = training_device(args.learner_device, "learner device")
    print(
        f"configuration: {os.cpu_count()} cores, {args.n_actors} actor(s), learner on {device}, policy {arch}, "
        f"{args.seconds:.0f} s per run, evaluation every {args.eval_every:g} s, seeds 0..{args.seeds - 1}"
    )
    keys = []
    for seed in range(args.seeds):
        for precision in ("fp32", "int8"):
            config = ActorQConfig(
                "CartPole-v1",
                precision,
                n_actors=args.n_actors,
                policy_arch=arch,
                batch_size=args.batch_size,
                max_actor_steps=steps,
                max_seconds=args.seconds,
                eval_every_s=args.eval_every,
                seed=seed,
                learner_device=device,
                learning_starts=100 if args.quick else None,  # a short run must train, or it is no run to compare
            )
            outcome = run_actorq(config)
            if empty := degenerate(outcome):  # as the CLI: a run that trained nothing measures no speed-up
                print(f"seed {seed} {precision}: trained nothing ({empty}), left out")
                continue
            with ResultStore(args.store) as store:
                result = actorq_result(config, outcome)
                store.put(result, replace=True)
                keys.append(result.job.key)
            learner, phases = outcome.learner, breakdown(outcome.actors)
            steps = sum(learner["per_actor"].values())
            print(
                f"seed {seed} {precision}: {steps / outcome.wall_seconds:7.1f} actor steps/s; best reward "
                f"{max(p['reward'] for p in outcome.curve):.1f}; learner {learner['updates']} updates, "
                f"{1000 * learner['train_seconds'] / max(learner['updates'], 1):.0f} ms/update, samples per insert "
                f"{learner['samples_per_insert']:.2f}; actors blocked in push {phases['push']:.1f} s of "
                f"{sum(phases.values()):.1f} s"
            )
    with ResultStore(args.store) as store:
        frame = store.to_dataframe()
    table = speedup_table(actorq_runs(frame[frame["key"].isin(keys)]))
    columns = [
        "precision",
        "seeds",
        "actor steps/s",
        "steps/s speed-up",
        "steps/s CI",
        "time to 95% (s)",
        "seeds reaching",
        "time speed-up",
        "time CI",
        "CI includes 1",
        "J / actor step",
    ]
    if not {"fp32", "int8"} <= set(table.get("precision", ())):
        print("int8 vs fp32: actor steps/s undetermined: a run trained nothing, so there is no pair to compare")
        return
    print(table[columns].round(3).to_string(index=False))
    int8 = table.set_index("precision").loc["int8"]
    print(
        f"int8 vs fp32: actor steps/s {int8['steps/s speed-up']:.2f}x {int8['steps/s CI']} (goal >= 3x); "
        f"time to 95% {int8['time speed-up']:.2f}x {int8['time CI']} (goal >= 1.3x, CI excluding 1)"
    )


if __name__ == "__main__":
    main()
