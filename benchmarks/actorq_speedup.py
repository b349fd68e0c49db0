"""ActorQ: DQN CartPole-v1 with a 2048x2048x2048 policy, fp32 vs int8 actors, same settings, one run each.

Prints actor env-steps per second (goal >= 1.8x) and time to 95% of the fp32 run's best reward (goal >= 1.5x),
with the learner's side (updates, ms per update, achieved samples per insert) that explains them.
Run: python benchmarks/actorq_speedup.py [--n-actors 1] [--seconds 360] [--store results/quarl.sqlite]
Each run gets the same wall-clock budget. One torch thread per process: on a 2-core machine one actor and the
learner's training thread fill the cores.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from quarl_bench.actorq.config import ActorQConfig
from quarl_bench.actorq.driver import RunOutcome, run_actorq, store_run
from quarl_bench.actorq.metrics import breakdown, reward_target, time_to_reward
from quarl_bench.store import ResultStore


def steps_per_second(outcome: RunOutcome) -> float:
    return sum(a["steps"] for a in outcome.actors) / outcome.wall_seconds


def energy_per_step(outcome: RunOutcome) -> float:
    return outcome.energy["kwh"] / max(sum(a["steps"] for a in outcome.actors), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-actors", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=360.0, help="wall-clock budget per run")
    parser.add_argument("--arch", default="2048,2048,2048")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", type=Path, default=Path("results/quarl.sqlite"))
    args = parser.parse_args()
    arch = tuple(int(w) for w in args.arch.split(","))
    outcomes = {}
    for precision in ("fp32", "int8"):
        config = ActorQConfig("CartPole-v1", precision, n_actors=args.n_actors, policy_arch=arch,
                              batch_size=args.batch_size, max_actor_steps=10**9, max_seconds=args.seconds,
                              eval_every_s=15.0, seed=args.seed)  # fmt: skip
        outcomes[precision] = run_actorq(config)
        with ResultStore(args.store) as store:
            store_run(config, outcomes[precision], store)
    fp32, int8 = outcomes["fp32"], outcomes["int8"]
    target = reward_target(fp32.curve)
    for name, outcome in outcomes.items():
        learner = outcome.learner
        print(f"{name}: {steps_per_second(outcome):7.1f} actor steps/s over {outcome.wall_seconds:.0f} s; "
              f"best reward {max(p['reward'] for p in outcome.curve):.1f}; time to {target:.1f}: "
              f"{time_to_reward(outcome.curve, target)} s; learner {learner['updates']} updates, "
              f"{1000 * learner['train_seconds'] / max(learner['updates'], 1):.0f} ms/update, samples per insert "
              f"{learner['samples_per_insert']:.2f}; breakdown {breakdown(outcome.actors)}; energy {outcome.energy}")  # fmt: skip
        print("  curve (s, actor steps, updates, reward):",
              [(round(p["seconds"]), p["actor_steps"], p["updates"], round(p["reward"], 1)) for p in outcome.curve])  # fmt: skip
    print(f"actor steps/s speed-up int8/fp32: {steps_per_second(int8) / steps_per_second(fp32):.2f}x (goal >= 1.8x)")
    t_fp32, t_int8 = time_to_reward(fp32.curve, target), time_to_reward(int8.curve, target)
    print(
        f"time-to-95% speed-up: {t_fp32 / t_int8:.2f}x (goal >= 1.5x)"
        if t_fp32 and t_int8
        else "time-to-95%: not reached by both runs"
    )
    print(f"energy fp32/int8: {fp32.energy['kwh'] / max(int8.energy['kwh'], 1e-12):.2f} ({fp32.energy['source']}); "
          f"per actor step: {energy_per_step(fp32) / energy_per_step(int8):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
