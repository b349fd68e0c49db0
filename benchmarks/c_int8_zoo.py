"""c-int8 on the zoo's classic-control and Box2D MLP agents: parity, closed-loop equivalence, Cortex-M4 size.

For each agent: ``export --backend c-int8 --allow-divergent`` (so every agent is certified, gate passed or not),
then one line with the parity figure, the closed-loop verdicts against the fake-quant W8A8 per-channel policy and
against fp32 (written whatever they say: --allow-degraded), and
the flash figure against its goal (1.2 x (int8 weight bytes + 4 KB)). The verdicts go to ``--store``; a rerun
reuses them.

    python benchmarks/c_int8_zoo.py --zoo ../shared/zoo --store results/c_int8_zoo.sqlite --out results/c_int8_zoo
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from zoo_mlp import ENVS, zoo_agents

from quarl_bench import AgentQuery, CertifyConfig, QuarlError, ResultStore, deploy_target, export_artifact, resolve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--store", default="results/c_int8_zoo.sqlite")
    parser.add_argument("--out", default="results/c_int8_zoo", help="folder for the JSON summary")
    parser.add_argument("--max-episodes", type=int, default=100)
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.max_episodes = 20
        args.store, args.out = (str(Path(tempfile.mkdtemp()) / name) for name in ("c.sqlite", "c_int8_zoo"))
    zoo = Path(args.zoo)
    agents = [("dqn", "CartPole-v1")] if args.quick else zoo_agents(zoo, envs=(*ENVS, "BipedalWalkerHardcore-v3"))
    summary = []
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with ResultStore(args.store) as store, tempfile.TemporaryDirectory() as folder:
        for algo, env in agents:
            start = time.perf_counter()
            try:
                ref = resolve(AgentQuery(env=env, algo=algo, folder=str(zoo), use_hub=False))
                done = export_artifact(
                    ref,
                    deploy_target("c-int8"),
                    Path(folder) / f"{algo}-{env}",
                    store,
                    force=True,
                    allow_divergent=True,
                    certify=CertifyConfig(max_episodes=args.max_episodes),
                    allow_degraded=True,
                )
            except QuarlError as error:
                print(f"{algo:6s} {env:26s} not exported: {error}", flush=True)
                summary.append({"algo": algo, "env": env, "error": str(error)})
                continue
            document = done.contract
            parity, m4 = document["parity"], document.get("cortex_m4", {})
            verdict, fp32 = document["certification"]["against_claimed"], document["certification"]["against_fp32"]
            figure = parity.get("flip_rate_outside_near_ties", parity.get("max_error_steps_outside_sensitive"))
            unit = "flips" if "flip_rate_outside_near_ties" in parity else "steps"
            flash = f"{m4['flash_bytes']}/{m4['flash_limit_bytes']} B" if "flash_bytes" in m4 else "no toolchain"
            print(
                f"{algo:6s} {env:26s} parity {figure:.3f} {unit} {'pass' if parity['passed'] else 'FAIL'}  "
                f"{verdict['verdict']:12s} {verdict['episodes']:4d} ep  mean diff {verdict['mean_difference']:+.2f} "
                f"(δ {verdict['delta']:.2f}, {verdict['guarantee']})  vs fp32 {fp32['verdict']:12s} "
                f"{fp32['episodes']:4d} ep  flash {flash}  {time.perf_counter() - start:.0f}s",
                flush=True,
            )
            summary.append(
                {
                    "algo": algo,
                    "env": env,
                    "parity": parity,
                    "certification": document["certification"],
                    "cortex_m4": m4,
                }
            )
    equivalent = sum(
        1 for row in summary if row.get("certification", {}).get("against_claimed", {}).get("verdict") == "equivalent"
    )
    safe = sum(1 for row in summary if row.get("certification", {}).get("against_fp32", {}).get("verdict") == "safe")
    within = sum(
        1
        for row in summary
        if row.get("cortex_m4", {}).get("flash_bytes", 1e12) <= row.get("cortex_m4", {}).get("flash_limit_bytes", 0)
    )
    print(
        f"certified equivalent to their fake-quant: {equivalent} of {len(summary)}; certified not worse than fp32: "
        f"{safe} of {len(summary)}; flash within goal: {within} of {len(summary)}"
    )
    (Path(args.out) / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
