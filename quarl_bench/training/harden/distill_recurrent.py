"""Distillation of a recurrent student (ppo_lstm): truncated backpropagation through time on trajectories.

The states of a recurrent policy are sequences: the student unrolls its LSTM over chunks of ``n_steps`` steps (the
zoo's ``n_steps``, as RecurrentPPO trains), each chunk starting from the teacher's state at its first step (zero at
an episode start), and learns the teacher's output at every step (the teacher carries its own state along the
same observations). Rounds then add the student's own trajectories, labelled by the teacher (DAgger's order), and
the loss is the feed-forward recipe's (:func:`~quarl_bench.training.harden.distill.student_loss`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from quarl_bench.families import Output, distribution_output
from quarl_bench.families.recurrent import distribution_step, pack, started, zero_state
from quarl_bench.training.harden.distill import (
    ROLLOUT_ENVS,
    FineTune,
    Step,
    released,
    step_budgets,
    student_and_teacher,
)
from quarl_bench.training.harden.recipes import Distill, Recipe
from quarl_bench.training.harden.student import calibrate_inputs, target_switch
from quarl_bench.types import QuantSpec

DEFAULT_UNROLL = 32  # steps per chunk where the agent has no n_steps


@dataclass
class Sequences:
    """Chunks of ``length`` steps: observations ``(chunks, length, *obs)``, episode starts ``(chunks, length)``,
    the teacher's state at each chunk's first step ``(layers, chunks, hidden)`` twice, the teacher's outputs
    ``(chunks * length, ...)`` in chunk-major order, and the Markov states visited (for input calibration)."""

    observations: np.ndarray
    starts: np.ndarray
    state: tuple[np.ndarray, np.ndarray]
    targets: Output
    markov: np.ndarray

    def __len__(self) -> int:
        return len(self.observations)


def rollout_sequences(actor, teacher, make_env: Callable, steps: int, seed: int, length: int) -> Sequences:
    """``actor`` plays (deterministic, its own state) ``ROLLOUT_ENVS`` envs seeded ``seed + i`` for at least
    ``steps`` steps in all, in whole chunks of ``length``; the teacher labels every step from its own state."""
    envs = ROLLOUT_ENVS
    rounds = max(1, -(-steps // (envs * length))) * length
    env = make_env(envs, seed)
    observations, starts, states, outputs, markov = [], [], [], [], []
    try:
        obs = env.reset()
        acting, teaching, begin = None, zero_state(teacher, envs), np.ones(envs, dtype=bool)
        for _ in range(rounds):
            teaching = started(teaching, begin)
            observations.append(np.asarray(obs, dtype=np.float32).copy())
            starts.append(begin.copy())
            states.append(teaching)
            markov.append(pack(obs, teaching))
            distribution, teaching = distribution_step(teacher, obs, teaching, begin)
            outputs.append(distribution_output(teacher, distribution))
            with torch.no_grad():
                actions, acting = actor.predict(obs, acting, begin, deterministic=True)
            obs, _, dones, _ = env.step(actions)
            begin = np.asarray(dones, dtype=bool)
    finally:
        env.close()
    # (rounds, envs, ...) -> chunks of `length` per env, env by env
    chunks = rounds // length

    def chunked(steps: np.ndarray | list[np.ndarray]) -> np.ndarray:
        array = np.asarray(steps)
        shaped = array.reshape(chunks, length, envs, *array.shape[2:])
        return np.moveaxis(shaped, 2, 0).reshape(envs * chunks, length, *array.shape[2:])

    firsts = [states[k * length] for k in range(chunks)]  # per chunk index: (layers, envs, hidden) twice
    first_h = np.stack([h for h, _ in firsts], axis=2)  # (layers, envs, chunks, hidden)
    first_c = np.stack([c for _, c in firsts], axis=2)
    layers, hidden = first_h.shape[0], first_h.shape[-1]
    state = (first_h.reshape(layers, envs * chunks, hidden), first_c.reshape(layers, envs * chunks, hidden))
    target = torch.as_tensor(chunked(torch.stack([output.tensor for output in outputs]).numpy()))
    return Sequences(
        chunked(observations),
        chunked(starts),
        state,
        Output(outputs[0].kind, target.reshape(-1, *target.shape[2:])),
        np.concatenate(markov),
    )


def joined(parts: list[Sequences]) -> Sequences:
    return Sequences(
        np.concatenate([p.observations for p in parts]),
        np.concatenate([p.starts for p in parts]),
        (np.concatenate([p.state[0] for p in parts], axis=1), np.concatenate([p.state[1] for p in parts], axis=1)),
        Output(parts[0].targets.kind, torch.cat([p.targets.tensor for p in parts])),
        np.concatenate([p.markov for p in parts]),
    )


def unrolled(student, sequences: Sequences, chunks: np.ndarray) -> Callable[[], Output]:
    """The student's outputs over ``chunks``, unrolled from each chunk's first state (sb3-contrib's sequence
    layout: chunk by chunk, steps within), gradients through every step of the chunk."""
    obs = student.obs_to_tensor(sequences.observations[chunks].reshape(-1, *sequences.observations.shape[2:]))[0]
    starts = torch.as_tensor(sequences.starts[chunks].reshape(-1), dtype=torch.float32)
    state = tuple(torch.as_tensor(part[:, chunks]) for part in sequences.state)

    def output() -> Output:
        distribution, _ = student.get_distribution(obs, state, starts)
        return distribution_output(student, distribution)

    return output


def distill_recurrent(
    agent,
    spec: QuantSpec,
    recipe: Recipe,
    budget: int,
    seed: int,
    on_round: Callable[[int, int, float], None] | None = None,
) -> FineTune:
    """:func:`~quarl_bench.training.harden.distill.distill` for a recurrent policy (see the module docstring)."""
    from quarl_bench.errors import QuarlError

    settings: Distill = recipe.part("distill")
    if recipe.part("sam") or recipe.part("noise"):
        raise QuarlError(f"recipe {recipe.name}: a recurrent policy is hardened by distill alone (expected distill)")
    if spec.state_bits:
        raise QuarlError(
            f"--state-bits {spec.state_bits}: hardening trains the weights of a recurrent policy, not its state's "
            "grid (expected a target without --state-bits; certify the result with it)"
        )
    torch.manual_seed(seed)
    begun = time.perf_counter()
    length = int(getattr(agent.model, "n_steps", 0) or DEFAULT_UNROLL)
    switch = target_switch(spec)
    student, teacher, parameters = student_and_teacher(agent, switch)
    optimizer = torch.optim.Adam(parameters, lr=settings.learning_rate)
    teacher_steps, student_steps = step_budgets(settings, budget)
    parts = [rollout_sequences(teacher, teacher, agent.make_env, teacher_steps, seed, length)]
    rng = np.random.default_rng(seed)
    gradient_steps, loss_value = 0, float("nan")
    chunk_batch = max(1, settings.batch_size // length)
    try:
        for number in range(settings.rounds + 1):
            if number:
                parts.append(rollout_sequences(student, teacher, agent.make_env, student_steps, seed + number, length))
            sequences = joined(parts)
            calibrate_inputs(student, switch, sequences.markov, spec.calibration_method)
            for _ in range(settings.epochs):
                order = rng.permutation(len(sequences))[: max(1, settings.epoch_states // length)]
                for batch in np.array_split(order, max(1, len(order) // chunk_batch)):
                    rows = (batch[:, None] * length + np.arange(length)).reshape(-1)
                    target = Output(sequences.targets.kind, sequences.targets.tensor[rows])
                    step = Step(unrolled(student, sequences, batch), switch, target, settings, 1.0)
                    loss_value = step.take(optimizer, False)
                    gradient_steps += 1
            if on_round:
                on_round(number, sum(len(p) * length for p in parts), loss_value)
    finally:
        released(student)
    env_steps = sum(len(p) * length for p in parts)
    return FineTune(env_steps, gradient_steps, time.perf_counter() - begun, loss_value)
