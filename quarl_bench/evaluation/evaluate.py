"""N-episode evaluation over vectorized envs with batched inference, plus action agreement with fp32.

Every random draw of an evaluation belongs to one env (its own generator from the seed and the env's index): which
other envs share its batch or its process cannot change its episodes, so ``--eval-workers`` plays the very episodes
one process plays (:mod:`quarl_bench.evaluation.workers`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.vec_env import VecEnv, VecMonitor, is_vecenv_wrapped

from quarl_bench.action_modes import ActionMode
from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.agreement import AgreementMeter, agreement_summary
from quarl_bench.evaluation.episode_seeds import EpisodeId, seed_every_episode
from quarl_bench.evaluation.margins import StateReservoir
from quarl_bench.evaluation.masks import (
    MaskCounts,
    mask_reader,
    mask_summary,
    mask_values,
    masked_argmax,
    masked_probabilities,
)
from quarl_bench.evaluation.outcomes import OutcomeTracker, per_outcome
from quarl_bench.zoo.policy import Policy, as_policy
from quarl_bench.zoo.quiet import native_output_silenced

ACTION_DRAWS, NOISE_DRAWS = 0, 1  # the two streams of an env's generator

HEARTBEAT_SECONDS = 60.0  # a long evaluation says how far it got this often (stderr)


@dataclass
class Episodes:
    """What one evaluation measured."""

    rewards: list[float]
    lengths: list[int]
    wall_seconds: float
    agreement: dict[str, float] = field(default_factory=dict)
    states: np.ndarray | None = None  # a uniform sample of the observations the policy acted on (record_states)
    vector_steps: int = 0  # batched decisions made (each steps every env once)
    identities: list[EpisodeId] = field(default_factory=list)  # per episode, as rewards: see episode_seeds
    outcomes: dict[str, list[float]] = field(default_factory=dict)  # per outcome, as rewards: see outcomes


def env_generators(seed: int, envs: range, stream: int) -> list[np.random.Generator]:
    """One generator per env index in ``envs``, from (``seed``, index, ``stream``)."""
    return [np.random.default_rng([seed, index, stream]) for index in envs]


class EpisodeActor:
    """The evaluated policy acting in an :class:`ActionMode` as rl-zoo3's ``enjoy`` does, with per-env draws.

    ``sampled`` (categorical policies): one uniform draw per env from its generator through the inverse CDF of the
    policy's probabilities. ``epsilon-greedy``: per env a coin with probability epsilon, heads a uniform action —
    what SB3's ``DQN.predict`` does for one env (for a batch SB3 flips one coin for all envs; one per env is the
    single-env evaluation the paper ran). ``last_greedy`` keeps the greedy actions of the last batch where they
    came for free (greedy modes, and the argmax of the sampled probabilities).
    """

    def __init__(self, policy: BasePolicy | Policy, mode: ActionMode, seed: int, envs: range) -> None:
        self.adapter = as_policy(policy)
        self.policy, self.mode = self.adapter.network, mode
        self.action_space = self.adapter.action_space
        self.draws = env_generators(seed, envs, ACTION_DRAWS)
        self.last_greedy: np.ndarray | None = None
        self.categorical = self.adapter.categorical
        self.stateful = self.adapter.carries_state
        self.greedy = self.adapter.greedy() if mode.kind != "sampled" and not self.stateful else None
        if mode.kind == "epsilon-greedy" and not isinstance(self.action_space, spaces.Discrete):
            raise ValueError(f"epsilon-greedy evaluation needs a discrete action space, not {self.action_space}")
        self.masks: np.ndarray | None = None  # the env's legal actions this step (play() sets them), None: all
        self.playing: np.ndarray | slice = slice(None)  # the envs whose decisions count (play() keeps it current)
        self.mask_counts = MaskCounts()

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        self.last_greedy = None
        if self.masks is not None:
            return self.predict_masked(observation, self.masks, state)
        if self.mode.kind == "sampled":
            if self.categorical:
                return self.sample(observation, state, episode_start)
            if self.stateful:  # the greedy action from the same state, for agreement
                self.last_greedy = np.asarray(self.adapter.act(observation, state, episode_start, True)[0])
            # other distributions draw from torch's generator: episodes then depend on the batch
            return self.adapter.act(observation, state, episode_start, deterministic=False)
        if self.greedy is not None:
            actions = self.greedy(observation)
        else:
            actions, state = self.adapter.act(observation, state, episode_start, deterministic=True)
        self.last_greedy = np.asarray(actions)
        if self.mode.kind == "epsilon-greedy":
            actions = self.explore(self.last_greedy)
        return actions, state

    def predict_masked(self, observation: np.ndarray, masks: np.ndarray, state=None):
        """The action among the legal ones (:mod:`~quarl_bench.evaluation.masks`): sampled from the renormalised
        probabilities, or the masked argmax of the decision values (epsilon-greedy explores legal actions only)."""
        if self.mode.kind == "sampled" and self.categorical:
            probs, state = self.adapter.probabilities(observation, state, None)
            unmasked = probs.argmax(axis=1)
            probs = masked_probabilities(probs, masks)
            self.last_greedy = probs.argmax(axis=1)
            actions = sampled_actions(probs, np.array([generator.random() for generator in self.draws]))
        else:
            if self.mode.kind == "sampled":
                raise QuarlError("this env masks actions: sampled actions under a mask need a categorical policy")
            values = mask_values(self.adapter, observation)
            unmasked, self.last_greedy = values.argmax(axis=1), masked_argmax(values, masks)
            actions = self.last_greedy
            if self.mode.kind == "epsilon-greedy":
                actions = self.explore(actions, masks)
        self.mask_counts.count(masks, unmasked, self.last_greedy, self.playing)
        return actions, state

    def sample(self, observation: np.ndarray, state=None, episode_start=None):
        probs, state = self.adapter.probabilities(observation, state, episode_start)
        self.last_greedy = probs.argmax(axis=1)  # SB3's mode: argmax of the probabilities
        return sampled_actions(probs, np.array([generator.random() for generator in self.draws])), state

    def explore(self, greedy: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        actions = greedy.copy()
        space = self.action_space
        assert isinstance(space, spaces.Discrete)  # epsilon-greedy needs one (checked when built)
        for index, generator in enumerate(self.draws):
            if generator.random() < self.mode.epsilon:
                if masks is None:
                    actions[index] = space.start + generator.integers(space.n)
                else:  # a uniform legal action
                    legal = np.flatnonzero(masks[index])
                    actions[index] = space.start + legal[generator.integers(len(legal))]
        return actions


def sampled_actions(probs: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Per row, the action whose interval of the cumulative probabilities holds that row's uniform draw in [0, 1)
    (inverse CDF; an action of probability 0 is never drawn)."""
    cdf = np.cumsum(probs, axis=1, dtype=np.float64)
    return np.minimum((cdf <= (uniforms * cdf[:, -1])[:, None]).sum(axis=1), probs.shape[1] - 1)


def greedy_actions(policy: BasePolicy | Policy) -> Callable[[np.ndarray], np.ndarray]:
    """``policy``'s deterministic actions for a batch of the states it acts on (a recurrent policy's Markov states,
    :mod:`~quarl_bench.families.recurrent`): the greedy fast path where there is one, else its own ``predict``."""
    return as_policy(policy).greedy()


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
    """Between the env and the actor: adds Gaussian noise to every env's observation from that env's generator
    (:func:`with_noise`) and keeps a reservoir sample of what the policy saw."""

    def __init__(self, inner, sigma: float, seed: int, envs: range, reservoir=None, playing=None, acting=None) -> None:
        self.inner, self.sigma, self.reservoir, self.playing = inner, sigma, reservoir, playing
        self.noise = env_generators(seed, envs, NOISE_DRAWS)
        self.acting = acting  # the policy's adapter: what it acts on (a recurrent policy's Markov states)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        if self.sigma > 0:
            observation = np.stack(
                [with_noise(row, self.sigma, generator) for row, generator in zip(observation, self.noise, strict=True)]
            )
        if self.reservoir is not None:
            seen = observation if self.acting is None else self.acting.acted_states(observation, state, episode_start)
            self.reservoir.add(seen if self.playing is None else seen[self.playing])
        return self.inner.predict(observation, state, episode_start, deterministic)


@dataclass
class Finished:
    """Episodes a process played for its envs: SB3's order key (vector step, env index), return, length, the
    episode's number within its env, its reset seed and its outcomes (:mod:`~quarl_bench.evaluation.outcomes`)."""

    episodes: list[tuple[int, int, float, int, int, int, dict[str, float]]]
    agreement: dict[str, float]
    states: np.ndarray | None
    vector_steps: int
    seen_states: int = 0  # observations the reservoir drew its sample from


def episode_targets(episodes: int, n_envs: int, envs: range) -> np.ndarray:
    """SB3's unbiased counting: env ``i`` of ``n_envs`` plays ``(episodes + i) // n_envs`` episodes."""
    return np.array([(episodes + index) // n_envs for index in envs], dtype=int)


def play(
    predictor,
    env: VecEnv,
    targets: np.ndarray,
    envs: range,
    playing: np.ndarray,
    seed: int,
    actor: EpisodeActor | None = None,
) -> tuple[list[tuple[int, int, float, int, int, int, dict[str, float]]], int]:
    """SB3's ``evaluate_policy`` loop for the envs ``envs`` (global indices) of a larger evaluation: every env steps
    until each has finished its target; returns come from ``Monitor`` where the env has one. ``playing`` is kept
    equal to which envs have not finished their target. Each episode starts from its own reset seed
    (:mod:`~quarl_bench.evaluation.episode_seeds`), -1 where the envs live in other processes. Where the env
    masks actions, ``actor`` is given its masks before every decision and counts the illegal actions played."""
    read_masks = mask_reader(env)
    masked = actor if read_masks is not None else None
    seeders = seed_every_episode(env, seed, envs)
    monitored = is_vecenv_wrapped(env, VecMonitor) or env.env_is_wrapped(Monitor)[0]
    counts = np.zeros(len(envs), dtype=int)
    current_rewards, current_lengths = np.zeros(len(envs)), np.zeros(len(envs), dtype=int)
    observations, states = env.reset(), None
    episode_starts = np.ones(len(envs), dtype=bool)
    finished: list[tuple[int, int, float, int, int, int, dict[str, float]]] = []
    outcomes = OutcomeTracker(len(envs))
    step = 0
    heartbeat = Heartbeat(int(np.sum(targets)))
    while playing.any():
        masks = read_masks() if masked is not None and read_masks is not None else None
        if masked is not None:
            masked.masks, masked.playing = masks, playing
        actions, states = predictor.predict(observations, state=states, episode_start=episode_starts)
        if masked is not None and masks is not None:
            masked.mask_counts.played(masks, actions, playing)
        observations, rewards, dones, infos = env.step(actions)
        current_rewards += rewards
        current_lengths += 1
        outcomes.step(infos)
        episode_starts[playing] = dones[playing]
        for i in np.flatnonzero(playing & dones):
            if not monitored or "episode" in infos[i]:
                reward, length = (
                    (infos[i]["episode"]["r"], infos[i]["episode"]["l"])
                    if monitored
                    else (current_rewards[i], current_lengths[i])
                )
                start = seeders[i].seeds[counts[i]] if seeders else -1
                ended = outcomes.finish(int(i), infos[i])
                finished.append((step, envs[i], float(reward), int(length), int(counts[i]), start, ended))
                counts[i] += 1
            current_rewards[i], current_lengths[i] = 0, 0
        playing[:] = counts < targets
        step += 1
        heartbeat.beat(len(finished))
    return finished, step


class Heartbeat:
    """A line on stderr every :data:`HEARTBEAT_SECONDS` of a long evaluation (100 Atari games ran 5-11 minutes with
    nothing said): the episodes finished of the target, and the time so far."""

    def __init__(self, target: int) -> None:
        self.target, self.start = target, time.perf_counter()
        self.next = self.start + HEARTBEAT_SECONDS

    def beat(self, done: int) -> None:
        now = time.perf_counter()
        if now >= self.next:
            from quarl_bench.errors import note
            from quarl_bench.progress import clock

            note(f"evaluating: {done} of {self.target} episodes in {clock(now - self.start)}")
            self.next = now + HEARTBEAT_SECONDS


def play_envs(
    policy: BasePolicy,
    env: VecEnv,
    envs: range,
    n_envs: int,
    episodes: int,
    seed: int,
    mode: ActionMode,
    reference: BasePolicy | None = None,
    obs_noise: float = 0.0,
    record_states: int = 0,
) -> Finished:
    """Play the share of an ``episodes``-episode evaluation over ``n_envs`` envs that falls to ``env``, which holds
    the envs with indices ``envs`` (seeded ``seed + index``). See :func:`evaluate` for the parameters."""
    actor = EpisodeActor(policy, mode, seed, envs)
    policy = actor.policy
    # the shared generators, for what draws outside the per-env ones (a non-categorical sampled policy: torch's)
    torch.manual_seed(seed)
    np.random.seed(seed)
    actor.action_space.seed(seed)  # what a policy without its own draws (the random baseline) samples from
    playing = np.ones(len(envs), dtype=bool)
    predictor: EpisodeActor | AgreementMeter | ObservationTap = actor
    if reference is not None:
        predictor = AgreementMeter(actor, reference, playing)
    reservoir = StateReservoir(record_states, seed + envs.start) if record_states else None
    if obs_noise > 0 or reservoir is not None:
        predictor = ObservationTap(predictor, obs_noise, seed, envs, reservoir, playing, actor.adapter)
    for acting in (policy, reference):
        if acting is not None:
            as_policy(acting).eval()  # what predict does on every call; the greedy fast path relies on it
    targets = episode_targets(episodes, n_envs, envs)
    playing &= targets > 0
    finished, steps = play(predictor, env, targets, envs, playing, seed, actor)
    meter = predictor.inner if isinstance(predictor, ObservationTap) else predictor
    agreement = meter.counts() if isinstance(meter, AgreementMeter) else {}
    if actor.mask_counts.masked:
        agreement |= actor.mask_counts.counts()
    states = reservoir.states() if reservoir is not None else None
    return Finished(finished, agreement, states, steps, reservoir.seen if reservoir is not None else 0)


def evaluate(
    policy: BasePolicy,
    env: VecEnv,
    episodes: int,
    seed: int,
    actions: ActionMode | None = None,
    reference: BasePolicy | None = None,
    torch_threads: int = 1,
    obs_noise: float = 0.0,
    record_states: int = 0,
) -> Episodes:
    """Play ``episodes`` full episodes split evenly over the envs of ``env`` (SB3's unbiased counting and order).

    Returns come from the ``Monitor`` wrapper, so an Atari episode ends at game over, not at a lost life.
    Random draws come from per-env generators seeded from ``seed`` (see :class:`EpisodeActor`).

    :param actions: how actions are picked (default deterministic).
    :param reference: when given (the fp32 policy), action agreement with it is measured as well.
    :param obs_noise: std of Gaussian noise added to each observation the policies see (robustness).
    :param record_states: keep a uniform sample of up to this many observations acted on (``Episodes.states``).
    :param torch_threads: intra-op threads while playing. 1 is 3x faster here for zoo-sized policies: between
        two small forward passes the env steps, and waking a second torch thread each time costs ~1 ms.
    """
    start = time.perf_counter()
    # native_output_silenced: pybullet envs print "argv[0]=" from C when first reset
    with torch.inference_mode(), torch_thread_count(torch_threads), native_output_silenced():
        share = play_envs(
            policy,
            env,
            range(env.num_envs),
            env.num_envs,
            episodes,
            seed,
            actions or ActionMode(),
            reference,
            obs_noise,
            record_states,
        )
    return episodes_of([share], time.perf_counter() - start, discrete_actions(policy), share.states)


def discrete_actions(policy: BasePolicy | Policy) -> bool:
    return as_policy(policy).discrete


def episodes_of(shares: list[Finished], seconds: float, discrete: bool, states: np.ndarray | None) -> Episodes:
    """One evaluation from the shares its processes played (episodes in SB3's order) and its state sample."""
    finished = sorted(episode for share in shares for episode in share.episodes)
    names = dict.fromkeys(name for share in shares for name in share.agreement)
    agreement = {name: sum(share.agreement.get(name, 0) for share in shares) for name in names}
    summary = agreement_summary(agreement, discrete) if agreement.get("decisions") else {}
    return Episodes(
        rewards=[reward for _, _, reward, *_ in finished],
        lengths=[length for _, _, _, length, *_ in finished],
        identities=[(index, number, start) for _, index, _, _, number, start, _ in finished],
        outcomes=per_outcome([ended for *_, ended in finished]),
        wall_seconds=seconds,
        agreement=summary | mask_summary(agreement),
        states=states,
        vector_steps=max(share.vector_steps for share in shares),
    )


@contextlib.contextmanager
def torch_thread_count(threads: int) -> Iterator[None]:
    """Set torch's intra-op thread count for a block and restore it after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
