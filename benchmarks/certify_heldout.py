"""A held-out check of certify's error rate on a real policy: zoo dqn CartPole, and a copy of it that plays the same
episodes identically except that it crashes in a few of them (pushes right from the first step to the end).

Which episodes crash is decided by the reset observation alone (a hash of it below --crash-rate), so the copy and
the original play the same reset seeds, and the pair differs only where the copy crashes. The true mean difference
is measured first on --truth-episodes paired episodes; certify then runs against the original's fp32 with the
tolerance set exactly there (--tolerance-abs = the loss), so every "safe" verdict is wrong. Over --runs seed bases,
the share of "safe" must stay within the confidence's α (plus its standard error). Each seed base is certified
twice, finite-sample (CartPole's returns lie in [0, 500]) and asymptotic, on the same stored batches.
Run: python benchmarks/certify_heldout.py [--zoo ../shared/zoo] [--runs 60] [--crash-rate 0.05]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from quarl_bench import AgentQuery, CertifyConfig, QuantSpec, ResultStore, certify_agent, resolve

RESET_BOX = 0.05  # CartPole's reset draws every state component from U[-0.05, 0.05]


class CrashingCopy(nn.Module):
    """The original Q-network, except in episodes whose reset observation hashes below ``rate``: there it pushes
    right (action 1) until the episode ends. A row re-decides whenever it sees an observation inside the reset box
    (a new episode; a rare mid-episode visit re-decides too, which the measured truth includes)."""

    def __init__(self, q_net: nn.Module, rate: float) -> None:
        super().__init__()
        self.q_net, self.rate = q_net, rate
        self.crashing = np.zeros(0, dtype=bool)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        logits = self.q_net(observation)
        rows = observation.detach().numpy().astype(np.float32)
        if len(self.crashing) != len(rows):
            self.crashing = np.zeros(len(rows), dtype=bool)
        for i in np.flatnonzero(np.all(np.abs(rows) <= RESET_BOX, axis=1)):
            digest = hashlib.sha256(rows[i].tobytes()).digest()
            self.crashing[i] = int.from_bytes(digest[:8], "little") / 2**64 < self.rate
        push_right = torch.tensor([[-1.0, 1.0]]).expand_as(logits)
        return torch.where(torch.as_tensor(self.crashing)[:, None], push_right, logits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=os.environ.get("QUARL_ZOO", "../shared/zoo"))
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--crash-rate", type=float, default=0.05)
    parser.add_argument("--truth-episodes", type=int, default=2000)
    parser.add_argument("--max-episodes", type=int, default=1000)
    parser.add_argument("--store", default=None)
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run at tiny sizes (the suite runs it)"
    )
    args = parser.parse_args()
    if args.quick:
        args.runs, args.truth_episodes, args.max_episodes = 1, 40, 40
    torch.set_num_threads(1)
    store_path = Path(args.store or tempfile.mkdtemp(prefix="heldout-")) / "heldout.sqlite"
    original = resolve(AgentQuery("CartPole-v1", algo="dqn", folder=args.zoo, use_hub=False))
    from quarl_bench.zoo.forms import load_agent

    q_net = load_agent(original).model.policy.q_net.q_net
    copy = resolve(AgentQuery("CartPole-v1", model=CrashingCopy(q_net, args.crash_rate)))
    with ResultStore(store_path) as store:
        # the truth: the mean paired difference over many episodes (the original plays 500 in every one)
        truth_config = CertifyConfig(
            tolerance_abs=1000.0, batch=args.truth_episodes, max_episodes=args.truth_episodes, seed=10**6
        )
        truth = certify_agent(copy, (QuantSpec("fp32"),), truth_config, store, baseline=original).verdicts[0]
        loss = -truth.mean
        standard_error = 500 * math.sqrt(args.crash_rate * (1 - args.crash_rate) / args.truth_episodes)
        print(
            f"true mean difference {truth.mean:+.2f} over {truth.episodes} paired episodes "
            f"(crash rate {args.crash_rate:.1%}; its standard error ~{standard_error:.1f})",
            flush=True,
        )
        found: dict[str, list] = {"finite-sample": [], "asymptotic": []}
        start = time.perf_counter()
        for run in range(args.runs):
            for guarantee in found:
                config = CertifyConfig(
                    tolerance_abs=loss, max_episodes=args.max_episodes, seed=1000 + 7919 * run, guarantee=guarantee
                )
                verdict = certify_agent(copy, (QuantSpec("fp32"),), config, store, baseline=original).verdicts[0]
                found[guarantee].append(verdict)
            print(
                f"run {run:3d}: "
                + "; ".join(f"{g} {v[-1].verdict} after {v[-1].episodes} pairs" for g, v in found.items()),
                flush=True,
            )
    alpha = 0.05
    limit = alpha + 3 * math.sqrt(alpha * (1 - alpha) / args.runs)
    print(f"\n{time.perf_counter() - start:.0f} s; α {alpha}, α + 3 SE {limit:.3f} over {args.runs} runs")
    for guarantee, verdicts in found.items():
        safe = sum(v.verdict == "safe" for v in verdicts)
        unsafe = sum(v.verdict == "unsafe" for v in verdicts)
        print(
            f"held-out, {guarantee}: P(safe) at the boundary {safe / args.runs:.3f} ({safe} of {args.runs}); "
            f"unsafe {unsafe}, undetermined {args.runs - safe - unsafe}; median pairs "
            f"{float(np.median([v.episodes for v in verdicts])):.0f}"
        )


if __name__ == "__main__":
    main()
