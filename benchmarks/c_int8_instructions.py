"""Instructions per action of ``c-int8`` (or ``c-int4``: ``--weight-bits 4``) on a Cortex-M4 under QEMU
(``-icount shift=0``), the plain loop against the DSP path (SXTB16/SADD16/SMLAD; c-int4 first spreads its nibbles
into int16 halves), side by side in one run: QuaRL Table 4's synthetic MLPs I-III and the zoo's MLP agents.
Cortex-M4 cycles ~ instructions x CPI; flash wait states and bus stalls are left out.

    python benchmarks/c_int8_instructions.py --zoo ../shared/zoo [--weight-bits 4]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from zoo_mlp import c_agent, zoo_agents

CALLS = {"I": 200, "II": 200, "III": 20}  # policy III is ~2.6M MACs: the 24-bit SysTick holds ~40 calls of it


def counted(name: str, artifact, observations: np.ndarray) -> tuple[int, float]:
    from quarl_bench.deploy.c_build import cortex_m4_instructions, cortex_m4_size

    files = dict(artifact.files)
    macs = artifact.info("program").macs
    plain = cortex_m4_instructions(files, observations, ("-DQUARL_NO_DSP",))
    dsp = cortex_m4_instructions(files, observations)
    flash = cortex_m4_size(files)["flash_bytes"]
    print(
        f"{name:34s} {macs:>9d} {plain:>12.0f} {dsp:>12.0f} {plain / dsp:>6.2f}x {macs / plain:>8.3f} {macs / dsp:>8.3f}"
        f" {flash:>9d}",
        flush=True,
    )
    return macs, plain / dsp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--observations", type=int, default=200, help="recorded observations per zoo agent")
    parser.add_argument("--weight-bits", type=int, choices=(8, 4), default=8, help="8: c-int8, 4: c-int4")
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.observations = 5

    from quarl_bench import QuarlError
    from quarl_bench.deploy.backends import c_artifact
    from quarl_bench.deploy.export import raw_observations
    from quarl_bench.deploy.synthetic import TABLE4_POLICIES, greedy_mlp, observations
    from quarl_bench.evaluation.calibration import visited_states

    start = time.perf_counter()
    ratios: dict[str, tuple[int, float]] = {}
    print(
        f"{'policy':34s} {'MACs':>9s} {'plain':>12s} {'DSP':>12s} {'ratio':>7s} {'MAC/ins':>8s} {'(DSP)':>8s} {'flash B':>9s}"
    )
    for name, hidden in TABLE4_POLICIES.items():
        if args.quick and name != "I":
            continue
        module = greedy_mlp(hidden)
        sample = observations()
        artifact = c_artifact(module, sample, args.weight_bits)
        ratios[name] = counted(f"Table 4 policy {name} {hidden}", artifact, sample[: CALLS[name]])
    zoo = Path(args.zoo)
    for algo, env_id in [("dqn", "CartPole-v1")] if args.quick else zoo_agents(zoo):
        try:
            agent, module, artifact = c_agent(zoo, algo, env_id, args.weight_bits)
        except QuarlError as error:
            print(f"{algo + '/' + env_id:34s} not a c-int8 policy: {error}")
            continue
        states = visited_states(agent.model.policy, agent.make_env, args.observations, 7_000_000)
        ratios[f"{algo}/{env_id}"] = counted(f"{algo}/{env_id}", artifact, raw_observations(module, states, np.float32))
    zoo_ratios = {name: value for name, value in ratios.items() if "/" in name}
    largest = max(zoo_ratios, key=lambda name: zoo_ratios[name][0]) if zoo_ratios else None
    tail = f", {zoo_ratios[largest][1]:.2f}x on the largest zoo MLP ({largest})" if largest else ""
    print(f"({time.perf_counter() - start:.0f} s)")
    policy = "III" if "III" in ratios else "I"
    print(f"c-int{args.weight_bits} DSP path: {ratios[policy][1]:.2f}x fewer instructions on policy {policy}{tail}")


if __name__ == "__main__":
    main()
