"""Distillation towards the fp32 teacher: the student (the agent's policy, its acting layers at the target spec)
learns the teacher's decisions on states from the teacher's rollouts, then from its own (DAgger's order), with no
env reward.

Loss per state batch, summed over the quantized student at the target grid and at each wider grid of certify's
ladder, and (``fp32_weight``; ``action_fp32_weight`` for continuous actions) the same weights unquantized:

- ``values`` (DQN, QR-DQN): a hinge that asks the teacher's best action to lead every other by a margin ``m``, so
  that the argmax the teacher takes survives rounding (the greedy action stays the teacher's), plus the MSE to the
  teacher's values (each state's centred on its mean: the greedy action depends on their differences only), both
  in units of ``m``. ``m`` is ``margin`` x what rounding the teacher to the target grid moves its centred values
  (root mean square, on the teacher's states): the zoo's Q-networks decide by gaps far below that (dqn CartPole:
  a median gap of 0.13 against 6.9 at int4 per channel).
- ``logits`` (categorical policies): KL(teacher || student).
- ``actions`` (continuous): MSE on the deterministic actions, clipped and scaled to [-1, 1].
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.nn import functional

from quarl_bench.families import Output
from quarl_bench.quant.quantize import clone_policy
from quarl_bench.training.harden.recipes import Distill, Recipe
from quarl_bench.training.harden.student import (
    acting_parameters,
    calibrate_inputs,
    convert,
    decision_output,
    release,
    target_switch,
    value_spread,
)
from quarl_bench.training.sam import SAM
from quarl_bench.types import QuantSpec

ROLLOUT_ENVS = 8
LADDER_BITS = (8, 6, 5)  # the widths above int4 that certify walks


@dataclass(frozen=True)
class FineTune:
    """What a fine-tune cost and did: env steps, gradient steps, seconds, and the final loss."""

    env_steps: int
    gradient_steps: int
    seconds: float
    final_loss: float


def distill(
    agent,
    spec: QuantSpec,
    recipe: Recipe,
    budget: int,
    seed: int,
    on_round: Callable[[int, int, float], None] | None = None,
) -> FineTune:
    """Distill ``agent``'s policy in place (weights stay fp32, the latent weights the student computed from).

    :param agent: a loaded agent (``zoo.agents.LoadedAgent``) with a feed-forward policy (a recurrent one:
        :mod:`~quarl_bench.training.harden.distill_recurrent`); its ``make_env`` gives the states.
    :param budget: env steps collected in all (teacher's and student's).
    :param on_round: called with (round, states so far, loss) after each round of training.
    """
    settings: Distill = recipe.part("distill")
    noise = recipe.part("noise")
    sam = recipe.part("sam")
    torch.manual_seed(seed)
    started = time.perf_counter()
    switch = target_switch(spec, noise.scale if noise else 0.0)
    student, teacher, parameters = student_and_teacher(agent, switch)
    base = torch.optim.Adam(parameters, lr=settings.learning_rate)
    optimizer = SAM(base, sam.rho) if sam else base
    teacher_steps, student_steps = step_budgets(settings, budget)
    states = [rollout_states(teacher, agent.make_env, teacher_steps, seed)]
    rng = np.random.default_rng(seed)
    gradient_steps, loss_value = 0, float("nan")
    try:
        for number in range(settings.rounds + 1):
            if number:
                switch.enabled = True
                states.append(rollout_states(student, agent.make_env, student_steps, seed + number))
            observed = np.concatenate(states)
            calibrate_inputs(student, switch, observed, spec.calibration_method)
            with torch.no_grad():
                targets = decision_output(teacher, student.obs_to_tensor(observed)[0])
            if number == 0:
                scale = margin_unit(teacher, spec, observed, targets) if targets.kind == "values" else 1.0
            for _ in range(settings.epochs):
                order = rng.permutation(len(observed))[: settings.epoch_states]
                for batch in np.array_split(order, max(1, len(order) // settings.batch_size)):
                    target = Output(targets.kind, targets.tensor[batch])
                    obs = student.obs_to_tensor(observed[batch])[0]
                    step = Step(partial(decision_output, student, obs), switch, target, settings, scale)
                    loss_value = step.take(optimizer, sam is not None)
                    gradient_steps += 1
            if on_round:
                on_round(number, len(observed), loss_value)
    finally:
        released(student)
    return FineTune(sum(len(s) for s in states), gradient_steps, time.perf_counter() - started, loss_value)


def student_and_teacher(agent, switch) -> tuple[Any, Any, list[torch.nn.Parameter]]:
    """The agent's policy as the student (its acting layers computing per ``switch``, only their parameters
    trainable), an fp32 copy of it as the teacher, and the parameters to train; :func:`released` undoes it."""
    student = agent.model.policy
    student.set_training_mode(False)
    teacher = clone_policy(student)
    convert(student, switch)
    parameters = acting_parameters(student)
    for p in student.parameters():
        p.requires_grad_(False)
    for p in parameters:
        p.requires_grad_(True)
    return student, teacher, parameters


def released(student) -> None:
    """The student's layers plain again, every parameter trainable, as before :func:`student_and_teacher`."""
    release(student)
    for p in student.parameters():
        p.requires_grad_(True)


def step_budgets(settings: Distill, budget: int) -> tuple[int, int]:
    """Env steps for the teacher's rollouts and for each student round out of ``budget``."""
    teacher_steps = int(budget * settings.teacher_share) if settings.rounds else budget
    return teacher_steps, (budget - teacher_steps) // settings.rounds if settings.rounds else 0


@dataclass(frozen=True)
class Step:
    """One gradient step on one batch; ``closure`` recomputes the loss, as SAM needs it twice. ``output_of()``: the
    student's output on the batch, as the switch sets its grid."""

    output_of: Callable[[], Output]
    switch: Any
    target: Output
    settings: Distill
    scale: float

    def closure(self, optimizer: torch.optim.Optimizer) -> float:
        optimizer.zero_grad()
        loss = student_loss(self.output_of, self.switch, self.target, self.settings, self.scale)
        loss.backward()
        return float(loss.detach())

    def take(self, optimizer: torch.optim.Optimizer, sharpness_aware: bool) -> float:
        if sharpness_aware:
            return float(optimizer.step(lambda: self.closure(optimizer)))
        loss = self.closure(optimizer)
        optimizer.step()
        return loss


def wider_grids(spec: QuantSpec) -> list[QuantSpec]:
    """The target's grid at every integer width of the certify ladder above it (int8, int6, int5 for int4)."""
    if not spec.number_format.is_int:
        return []
    return [replace(spec, precision=f"int{bits}") for bits in LADDER_BITS if bits > spec.bits]


def margin_unit(teacher, spec: QuantSpec, states: np.ndarray, targets: Output) -> float:
    """What rounding the teacher's weights to ``spec``'s grid moves its centred values by (root mean square over
    ``states`` and actions); the teacher's median spread where rounding moves nothing."""
    from quarl_bench.quant.quantize import quantize

    rounded, _ = quantize(teacher, spec.weights_only())
    with torch.no_grad():
        moved = _centred(decision_output(rounded, teacher.obs_to_tensor(states)[0]).tensor) - _centred(targets.tensor)
    unit = float(moved.pow(2).mean().sqrt())
    return unit if unit > 0 else max(value_spread(targets.tensor.numpy()), 1e-6)


def student_loss(
    output_of: Callable[[], Output], switch, target: Output, settings: Distill, scale: float
) -> torch.Tensor:
    """The loss at the target grid, at each wider grid of the ladder (a student tuned to one grid alone sits on
    knife edges of the others, and certify walks them widest first), and unquantized."""
    target_spec = switch.spec
    loss = distill_loss(output_of(), target, settings.margin, scale)
    for wider in wider_grids(target_spec):
        switch.spec = wider
        loss = loss + distill_loss(output_of(), target, settings.margin, scale)
    switch.spec = target_spec
    weight = settings.action_fp32_weight if target.kind == "actions" else settings.fp32_weight
    if weight:
        switch.enabled = False
        loss = loss + weight * distill_loss(output_of(), target, settings.margin, scale)
        switch.enabled = True
    return loss


def distill_loss(output: Output, target: Output, margin: float, scale: float) -> torch.Tensor:
    """The student's loss against the teacher's output on one batch (see the module docstring); values: the margin
    is ``margin`` x ``scale``."""
    if output.kind == "logits":
        return functional.kl_div(
            functional.log_softmax(output.tensor, dim=1),
            functional.log_softmax(target.tensor, dim=1),
            log_target=True,
            reduction="batchmean",
        )
    if output.kind == "actions":
        return functional.mse_loss(output.tensor, target.tensor)
    unit = scale * margin if margin > 0 else scale
    # the greedy action depends on differences between actions only: match the values centred per state
    loss = functional.mse_loss(_centred(output.tensor) / unit, _centred(target.tensor) / unit)
    if margin > 0 and output.tensor.shape[1] > 1:
        best = target.tensor.argmax(dim=1, keepdim=True)
        lead = (output.tensor.gather(1, best) - output.tensor) / unit  # the best action's lead over each, in m
        others = torch.ones_like(lead, dtype=torch.bool).scatter_(1, best, False)
        loss = loss + functional.relu(1 - lead)[others].mean()
    return loss


def _centred(values: torch.Tensor) -> torch.Tensor:
    return values - values.mean(dim=1, keepdim=True)


def rollout_states(policy, make_env: Callable, steps: int, seed: int) -> np.ndarray:
    """``steps`` observations (as the policy receives them) from the policy's deterministic play on
    ``ROLLOUT_ENVS`` envs seeded ``seed + i``; the policy's own ``predict``, so converted layers act as converted."""
    if steps <= 0:
        return np.empty((0, *policy.observation_space.shape), dtype=np.float32)
    n_envs = min(ROLLOUT_ENVS, steps)
    env = make_env(n_envs, seed)
    try:
        observations = env.reset()
        states: list[np.ndarray] = []
        while len(states) * n_envs < steps:
            states.append(np.asarray(observations, dtype=np.float32).copy())
            with torch.no_grad():
                actions, _ = policy.predict(observations, deterministic=True)
            observations, _, _, _ = env.step(actions)
    finally:
        env.close()
    return np.concatenate(states)[:steps]
