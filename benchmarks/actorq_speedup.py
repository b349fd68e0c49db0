"""ActorQ: DQN CartPole-v1 with a 2048x2048x2048 policy, fp32 vs int8 actors, same settings, one run each.

Prints actor env-steps per second (goal >= 1.8x) and time to 95% of the fp32 run's best reward (goal >= 1.5x).
Run: python benchmarks/actorq_speedup.py [--n-actors 1] [--max-actor-steps 30000] [--store results/quarl.sqlite]
On a 2-core machine one actor and the learner (one torch thread each) fill the cores.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from quarl_bench.actorq.metrics import breakdown, time_to_reward
from quarl_bench.actorq.run import ActorQConfig, run_actorq, store_run
from quarl_bench.store import ResultStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-actors", type=int, default=1)
    parser.add_argument("--max-actor-steps", type=int, default=30_000)
    parser.add_argument("--arch", default="2048,2048,2048")
    parser.add_argument("--store", type=Path, default=Path("results/quarl.sqlite"))
    args = parser.parse_args()
    arch = tuple(int(w) for w in args.arch.split(","))
    outcomes = {}
    for precision in ("fp32", "int8"):
        config = ActorQConfig("CartPole-v1", precision, n_actors=args.n_actors, policy_arch=arch,
                              max_actor_steps=args.max_actor_steps, eval_every_s=15.0)  # fmt: skip
        outcomes[precision] = run_actorq(config)
        with ResultStore(args.store) as store:
            store_run(config, outcomes[precision], store)
    fp32, int8 = outcomes["fp32"], outcomes["int8"]
    target = 0.95 * max(p["reward"] for p in fp32.curve)
    for name, outcome in outcomes.items():
        steps = sum(a["steps"] for a in outcome.actors)
        print(f"{name}: {steps / outcome.wall_seconds:7.1f} actor steps/s, time to {target:.0f} reward: "
              f"{time_to_reward(outcome.curve, target)} s, breakdown {breakdown(outcome.actors)}, "
              f"energy {outcome.energy}")  # fmt: skip
    speed = (sum(a["steps"] for a in int8.actors) / int8.wall_seconds) / (
        sum(a["steps"] for a in fp32.actors) / fp32.wall_seconds
    )
    t_fp32, t_int8 = time_to_reward(fp32.curve, target), time_to_reward(int8.curve, target)
    print(f"actor steps/s speed-up int8/fp32: {speed:.2f}x (goal >= 1.8x)")
    print(
        f"time-to-95% speed-up: {t_fp32 / t_int8:.2f}x (goal >= 1.5x)"
        if t_fp32 and t_int8
        else "time-to-95%: not reached by both runs"
    )
    print(
        f"energy ratio fp32/int8: {fp32.energy['kwh'] / max(int8.energy['kwh'], 1e-12):.2f} ({fp32.energy['source']})"
    )


if __name__ == "__main__":
    main()
