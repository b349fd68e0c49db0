"""N-episode evaluation over vectorized envs with batched inference, plus action agreement with fp32."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.vec_env import VecEnv

from quarl_bench.greedy import greedy_function
from quarl_bench.margins import StateReservoir
from quarl_bench.types import ActionMode
from quarl_bench.zoo.quiet import native_output_silenced


@dataclass
class Episodes:
    """What one evaluation measured."""

    rewards: list[float]
    lengths: list[int]
    wall_seconds: float
    agreement: dict[str, float] = field(default_factory=dict)
    states: np.ndarray | None = None  # a uniform sample of the observations the policy acted on (record_states)
    vector_steps: int = 0  # batched decisions made (each steps every env once)


class Actor:
    """What ``evaluate_policy`` calls: the evaluated policy acting in an :class:`ActionMode`.

    ``epsilon-greedy`` goes through the SB3 model's own ``predict`` (DQN/QR-DQN: one coin flip per batch, a random
    action from the action space for the whole batch), on a shallow copy of the model holding the evaluated policy.
    """

    def __init__(self, policy: BasePolicy, mode: ActionMode, model: BaseAlgorithm | None = None) -> None:
        self.policy, self.mode = policy, mode
        self.calls = 0
        self.action_space = policy.action_space
        self.model: BaseAlgorithm | None = None
        self.greedy = greedy_function(policy) if mode.deterministic else None
        if mode.kind == "epsilon-greedy":
            if model is None:
                raise ValueError("epsilon-greedy evaluation needs the SB3 model whose predict explores")
            self.model = copy.copy(model)
            self.model.policy = policy
            self.model.exploration_rate = mode.epsilon
            self.action_space = model.action_space

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        self.calls += 1
        if self.model is not None:
            return self.model.predict(observation, state, episode_start, deterministic=False)
        if self.greedy is not None:
            return self.greedy(observation), state
        return self.policy.predict(observation, state, episode_start, self.mode.deterministic)


def greedy_actions(policy: BasePolicy) -> Callable[[np.ndarray], np.ndarray]:
    """``policy``'s deterministic actions for a batch (no recurrent state): the greedy fast path where there is one,
    else its own ``predict``."""
    fast = greedy_function(policy)
    return fast if fast is not None else (lambda observation: policy.predict(observation, None, None, True)[0])


class AgreementMeter:
    """Wraps the evaluated actor; on every batch also compares its policy's greedy action with a reference policy's.

    Discrete actions: fraction of equal greedy actions. Continuous: mean L2 distance between greedy actions
    and that distance relative to the reference action's norm. Counted over every decision the
    evaluation made (all envs, every step).
    """

    def __init__(self, actor: Actor, reference: BasePolicy) -> None:
        self.actor = actor
        self.policy = actor.policy
        self.reference = reference
        self.policy_greedy, self.reference_greedy = greedy_actions(self.policy), greedy_actions(reference)
        self.discrete = isinstance(
            self.policy.action_space, spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary
        )
        self.decisions = 0
        self.equal = 0
        self.distance_sum = 0.0
        self.relative_sum = 0.0

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        actions, state = self.actor.predict(observation, state, episode_start, deterministic)
        greedy = actions if self.actor.mode.deterministic else self.policy_greedy(observation)
        expected = self.reference_greedy(observation)
        self._record(np.asarray(greedy), np.asarray(expected))
        return actions, state

    def _record(self, actions: np.ndarray, expected: np.ndarray) -> None:
        n = len(actions)
        self.decisions += n
        if self.discrete:
            self.equal += int(np.sum(np.all(actions.reshape(n, -1) == expected.reshape(n, -1), axis=1)))
            return
        distance = np.linalg.norm((actions - expected).reshape(n, -1), axis=1)
        norm = np.linalg.norm(expected.reshape(n, -1), axis=1)
        self.distance_sum += float(distance.sum())
        self.relative_sum += float(np.sum(distance / np.maximum(norm, 1e-8)))

    def summary(self) -> dict[str, float]:
        if not self.decisions:
            return {}
        if self.discrete:
            return {"decisions": self.decisions, "action_agreement": self.equal / self.decisions}
        return {
            "decisions": self.decisions,
            "action_l2": self.distance_sum / self.decisions,
            "action_rel_error": self.relative_sum / self.decisions,
        }


def with_noise(observation: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``observation`` plus Gaussian noise of std ``sigma`` drawn from ``rng`` (unchanged for 0); uint8 images stay
    uint8, rounded and clipped."""
    if sigma <= 0:
        return observation
    observation = np.asarray(observation)
    noisy = observation + rng.normal(0.0, sigma, size=observation.shape)
    if observation.dtype == np.uint8:
        noisy = np.clip(np.rint(noisy), 0, 255)
    return noisy.astype(observation.dtype)


class ObservationTap:
    """Between the env and the actor: adds seeded Gaussian noise to every observation (:func:`with_noise`) and keeps
    a reservoir sample of what the policy saw."""

    def __init__(self, inner, sigma: float, seed: int, reservoir=None) -> None:
        self.inner, self.sigma, self.reservoir = inner, sigma, reservoir
        self.rng = np.random.default_rng(seed)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        observation = with_noise(observation, self.sigma, self.rng)
        if self.reservoir is not None:
            self.reservoir.add(observation)
        return self.inner.predict(observation, state, episode_start, deterministic)


def evaluate(
    policy: BasePolicy,
    env: VecEnv,
    episodes: int,
    seed: int,
    actions: ActionMode | None = None,
    reference: BasePolicy | None = None,
    torch_threads: int = 1,
    model: BaseAlgorithm | None = None,
    obs_noise: float = 0.0,
    record_states: int = 0,
) -> Episodes:
    """Play ``episodes`` full episodes split evenly over the envs of ``env`` (SB3's unbiased counting).

    Returns come from the ``Monitor`` wrapper, so an Atari episode ends at game over, not at a lost life.
    torch, numpy and the action space are seeded with ``seed``, so stochastic (Atari) actions are reproducible too.

    :param actions: how actions are picked (default deterministic); ``epsilon-greedy`` needs ``model``.
    :param reference: when given (the fp32 policy), action agreement with it is measured as well.
    :param obs_noise: std of Gaussian noise added to each observation the policies see (robustness).
    :param record_states: keep a uniform sample of up to this many observations acted on (``Episodes.states``).
    :param torch_threads: intra-op threads while playing. 1 is 3x faster here for zoo-sized policies: between
        two small forward passes the env steps, and waking a second torch thread each time costs ~1 ms.
    """
    mode = actions or ActionMode()
    actor = Actor(policy, mode, model)
    torch.manual_seed(seed)
    np.random.seed(seed)  # SB3's DQN.predict flips its exploration coin with numpy's global generator
    actor.action_space.seed(seed)
    predictor = AgreementMeter(actor, reference) if reference is not None else actor
    reservoir = StateReservoir(record_states, seed) if record_states else None
    if obs_noise > 0 or reservoir is not None:
        predictor = ObservationTap(predictor, obs_noise, seed, reservoir)
    for acting in (policy, reference):
        if isinstance(acting, BasePolicy):
            acting.set_training_mode(False)  # what predict does on every call; the greedy fast path relies on it
    start = time.perf_counter()
    # native_output_silenced: pybullet envs print "argv[0]=" from C when first reset
    with torch.inference_mode(), torch_thread_count(torch_threads), native_output_silenced():
        rewards, lengths = evaluate_policy(
            predictor,  # type: ignore[arg-type]
            env,
            n_eval_episodes=episodes,
            deterministic=mode.deterministic,
            return_episode_rewards=True,
            warn=False,
        )
    seconds = time.perf_counter() - start
    meter = predictor.inner if isinstance(predictor, ObservationTap) else predictor
    agreement = meter.summary() if isinstance(meter, AgreementMeter) else {}
    states = reservoir.states() if reservoir is not None else None
    return Episodes([float(r) for r in rewards], [int(n) for n in lengths], seconds, agreement, states, actor.calls)


@contextlib.contextmanager
def torch_thread_count(threads: int) -> Iterator[None]:
    """Set torch's intra-op thread count for a block and restore it after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
