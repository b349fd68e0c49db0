"""``--eval-workers N``: one evaluation's envs split over N forked processes, each stepping its envs and running its
own copy of the policy, so env steps and inference both spread over the cores.

Env-bound Atari on 2 cores: one process steps 8 envs (8.9 ms) and then runs the CNN (4.3 ms) per batch, one core
idle; SB3's SubprocVecEnv (a process per env) sends every frame back to one process that still runs the CNN alone,
and was slower than one process here (0.89x). Forked workers inherit the policy as it is (fake-quantized weights
included) without pickling it, build only their own envs, and send back episode returns, never
observations. Draws are per env (:mod:`quarl_bench.evaluation.evaluate`), so the episodes equal one process's.
"""

from __future__ import annotations

import gc
import multiprocessing
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

import numpy as np
import torch
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.vec_env import VecEnv

from quarl_bench.action_modes import ActionMode
from quarl_bench.evaluation.evaluate import Episodes, Finished, discrete_actions, episodes_of, play_envs
from quarl_bench.zoo.quiet import native_output_silenced

EnvFactory = Callable[[int, int], VecEnv]  # (n_envs, seed) -> envs seeded seed, seed + 1, ...


def env_shares(n_envs: int, workers: int) -> list[range]:
    """Contiguous, near-equal ranges of env indices, one per worker (fewer when there are fewer envs)."""
    return [range(int(part[0]), int(part[-1]) + 1) for part in np.array_split(np.arange(n_envs), min(workers, n_envs))]


def evaluate_in_workers(
    policy: BasePolicy,
    make_env: EnvFactory,
    n_envs: int,
    workers: int,
    episodes: int,
    seed: int,
    actions: ActionMode | None = None,
    reference: BasePolicy | None = None,
    obs_noise: float = 0.0,
    record_states: int = 0,
) -> Episodes:
    """:func:`~quarl_bench.evaluation.evaluate.evaluate` over ``n_envs`` envs made by ``make_env``, split over ``workers``
    forked processes with one torch thread each. The states sample is merged so that it stays uniform over all
    visited states (it is not the sample one process would keep)."""
    shares = env_shares(n_envs, workers)
    context = multiprocessing.get_context("fork")  # inherit the policy and the loaded modules: no pickling
    start = time.perf_counter()
    running = []
    gc.freeze()  # the children's collector then leaves the parent's objects (and their memory pages) alone
    for envs in shares:
        receiver, sender = context.Pipe(duplex=False)
        args = (
            policy,
            make_env,
            envs,
            n_envs,
            episodes,
            seed,
            actions or ActionMode(),
            reference,
            obs_noise,
            record_states,
            sender,
        )
        process = context.Process(target=play_share, args=args, daemon=True)
        process.start()
        sender.close()
        running.append((process, receiver))
    gc.unfreeze()
    finished: list[Finished] = []
    try:
        for _, receiver in running:
            outcome = receiver.recv()
            if isinstance(outcome, str):
                raise RuntimeError(f"an evaluation worker failed:\n{outcome}")
            finished.append(outcome)
    except EOFError as error:
        raise RuntimeError("an evaluation worker died without a result (killed, or out of memory?)") from error
    finally:
        for process, receiver in running:
            receiver.close()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    seconds = time.perf_counter() - start
    states = merged_sample(finished, record_states, seed) if record_states else None
    return episodes_of(finished, seconds, discrete_actions(policy), states)


def play_share(
    policy,
    make_env: EnvFactory,
    envs: range,
    n_envs: int,
    episodes: int,
    seed: int,
    mode: ActionMode,
    reference,
    obs_noise: float,
    record_states: int,
    sender: Connection,
) -> None:
    """A worker's whole life: its envs (indices ``envs``), its episodes, the result down the pipe."""
    torch.set_num_threads(1)  # before any torch op: the parent's thread pool did not survive the fork
    try:
        with torch.inference_mode(), native_output_silenced():
            env = make_env(len(envs), seed + envs.start)
            try:
                outcome: Finished | str = play_envs(
                    policy, env, envs, n_envs, episodes, seed, mode, reference, obs_noise, record_states
                )
            finally:
                env.close()
    except BaseException:  # noqa: BLE001  (reported to the parent, which raises)
        outcome = traceback.format_exc()
    sender.send(outcome)
    sender.close()


def merged_sample(shares: list[Finished], capacity: int, seed: int) -> np.ndarray:
    """A uniform sample of at most ``capacity`` states over all shares, from each share's uniform sample: how
    many come from each share is drawn as a uniform sample of all states would draw it (hypergeometric)."""
    generator = np.random.default_rng(seed)
    seen = np.array([share.seen_states for share in shares])
    take = generator.multivariate_hypergeometric(seen, min(capacity, int(seen.sum())))
    parts = [
        share.states[generator.choice(len(share.states), count, replace=False)]
        for share, count in zip(shares, take, strict=True)
        if count and share.states is not None
    ]
    return np.concatenate(parts) if parts else np.empty((0,))
