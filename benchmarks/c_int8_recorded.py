"""c-int8 on recorded states, as a firmware engineer checks it: per zoo MLP agent, the parity gate's figure on
10,000 recorded fp32-visited states (apart from the calibration and fixed states), the same states plus the
adversarial set (NaN, +-inf, +-1e30, +-3.4e38 in every slot) run under ASan + UBSan + float-cast-overflow, and
``make check`` in the firmware folder export writes.

    python benchmarks/c_int8_recorded.py --zoo ../shared/zoo --states 10000
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from zoo_mlp import ALGOS, ENVS, c_agent, zoo_agents

RECORDED_SEED = 7_000_000  # apart from the calibration (1,000,000) and fixed-state seeds
SANITIZE = ["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all"]
ADVERSARIAL = (float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 3.4e38, -3.4e38)

PLAY = r"""
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include "policy.h"
#include "observations.h"
int main(void) {
    float action[QUARL_ACTION_DIM];
    int n, refused = 0;
    for (n = 0; n < QUARL_RECORDED; n++) {
        int status = quarl_policy_act(QUARL_OBSERVATIONS[n], action);
        refused += status < 0;
    }
    printf("%d refused\n", refused);
    return 0;
}
"""


def adversarial_rows(base: np.ndarray) -> np.ndarray:
    """Each adversarial value in each observation slot of one recorded observation."""
    rows = []
    for slot in range(base.shape[0]):
        for value in ADVERSARIAL:
            row = base.copy()
            row[slot] = value
            rows.append(row)
    return np.asarray(rows, np.float32)


def sanitized(files: dict[str, bytes], observations: np.ndarray) -> str:
    from quarl_bench.deploy.c_build import HOST_FLAGS, _observations_header

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for file, data in {
            **files,
            "observations.h": _observations_header(observations),
            "play.c": PLAY.encode(),
        }.items():
            (folder / file).write_bytes(data)
        build = [shutil.which("gcc"), *HOST_FLAGS, *SANITIZE, "play.c", "policy.c", "-o", "play"]
        subprocess.run(build, cwd=folder, check=True, capture_output=True)
        done = subprocess.run(["./play"], cwd=folder, capture_output=True, text=True, check=False)
        if done.returncode or "runtime error" in done.stderr or "AddressSanitizer" in done.stderr:
            return "REPORT: " + done.stderr.strip().splitlines()[0]
        return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--states", type=int, default=10_000)
    parser.add_argument("--algo", nargs="*", default=list(ALGOS))
    parser.add_argument("--env", nargs="*", default=list(ENVS))
    parser.add_argument("--weight-bits", type=int, choices=(8, 4), default=8, help="c-int8 (default) or c-int4")
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.states, args.algo, args.env = 50, ["dqn"], ["CartPole-v1"]

    from quarl_bench import QuarlError
    from quarl_bench.deploy.backends import runner
    from quarl_bench.deploy.c_folder import firmware_files, test_vectors
    from quarl_bench.deploy.c_source import CNames
    from quarl_bench.deploy.export import raw_observations
    from quarl_bench.deploy.parity import claimed_spec, parity
    from quarl_bench.evaluation.calibration import visited_states
    from quarl_bench.evaluation.margins import decision_values
    from quarl_bench.methods.ptq import quantized

    zoo = Path(args.zoo)
    print(f"{'agent':34s} {'gate on recorded':>34s}  sanitizers ({args.states} recorded + adversarial)  make check")
    tally = {"agents": 0, "gate": 0, "clean": 0, "check": 0}
    for algo, env_id in zoo_agents(zoo, args.algo, args.env):
        start = time.perf_counter()
        try:
            agent, module, artifact = c_agent(zoo, algo, env_id, args.weight_bits)
        except QuarlError as error:
            print(f"{algo + '/' + env_id:34s} not a C policy: {error}")
            continue
        policy = agent.model.policy
        states = visited_states(policy, agent.make_env, args.states, RECORDED_SEED)
        raw = raw_observations(module, states, np.float32)
        claim = claimed_spec(f"c-int{args.weight_bits}")
        claimed = quantized(agent, claim)[0].predict(states, deterministic=True)[0]
        fp32 = policy.predict(states, deterministic=True)[0]
        bounds = None if module.discrete else (module.low.numpy(), module.high.numpy())
        gate = parity(runner(artifact, threads=1), raw, claimed, fp32, decision_values(policy, states), bounds, "int8")
        figure = (
            f"flips {gate['flip_rate_outside_near_ties']:.2%}"
            if "flip_rate_outside_near_ties" in gate
            else f"{gate['max_error_steps_outside_sensitive']:.2f} steps ({gate['max_error_steps']:.2f} all)"
        )
        figure += " passed" if gate["passed"] else " FAILED"
        checked = sanitized(dict(artifact.files), np.concatenate([raw, adversarial_rows(raw[0])]))
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            program = artifact.info("program")
            vectors = test_vectors(raw, program.mlp.obs_dim)
            files = dict(artifact.files) | firmware_files(dict(artifact.files), vectors, program, CNames())
            for file, data in files.items():
                (folder / file).write_bytes(data)
            made = subprocess.run(["make", "-s", "check"], cwd=folder, capture_output=True, text=True, check=False)
            make = made.stdout.strip() if made.returncode == 0 else "FAILED " + made.stdout.strip()
        print(
            f"{algo + '/' + env_id:34s} {figure:>34s}  {checked:28s} {make}  ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
        tally["agents"] += 1
        tally["gate"] += bool(gate["passed"])
        tally["clean"] += not checked.startswith("REPORT")
        tally["check"] += not make.startswith("FAILED")
    n = tally["agents"]
    print(
        f"c-int{args.weight_bits} on recorded states: gate passed {tally['gate']} of {n}; sanitizers clean {tally['clean']} of {n}; "
        f"make check passed {tally['check']} of {n}"
    )


if __name__ == "__main__":
    main()
