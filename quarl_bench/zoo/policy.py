"""One interface over every kind of policy quarl-bench acts with: :func:`as_policy` wraps it in its adapter.

Stages ask the adapter (spaces, whether it carries state, its greedy actions on the states it acts on, its decision
values, its acting layers) instead of branching on what they hold. The kinds:

- ``sb3``: a Stable-Baselines3 policy (every algorithm of :data:`~quarl_bench.zoo.algorithms.ALGOS`);
- ``recurrent``: sb3-contrib's ``RecurrentActorCriticPolicy``: it acts on Markov states ``[obs | h | c]``
  (:mod:`quarl_bench.families.recurrent`);
- ``dict``: an SB3 policy on Dict observations (goal-conditioned): its states are flat rows, the keys concatenated
  in a declared order (:mod:`quarl_bench.observation_layout`);
- ``module`` / ``onnx``: a user's torch module or ONNX graph as an SB3 policy (:mod:`quarl_bench.zoo.foreign`);
- ``chunked``: a user's module predicting a chunk of actions (ACT-shaped, :mod:`quarl_bench.zoo.chunked`): it
  carries its pending actions or recent chunks as its state;
- ``artifact``: an exported artifact's runner (:func:`artifact_policy`, a recurrent one carrying its state), on raw
  observations; ``normalized``: an SB3 policy fed raw observations, normalising them as its VecNormalize would
  (:func:`normalized_policy`, the reference an artifact is compared with);
- ``predictor``: anything else with SB3's ``predict`` and an ``action_space`` (the random policy): it acts, and has
  no layers or decision values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

Greedy = Callable[[np.ndarray], np.ndarray]
Follower = Callable[[np.ndarray, np.ndarray | None], np.ndarray]  # greedy along a trajectory: (obs, starts)


class Policy:
    """A policy that acts on a batch of observations (one row per env).

    :param network: the object that acts (an SB3 ``BasePolicy``, or anything with ``predict``).
    """

    kind = "predictor"
    torch_layers = True  # its network is torch layers (an ONNX graph played as itself, on ONNX Runtime, is not)
    deploy_form = "module"  # what export builds from it (deploy/export.FORMS): a torch module, run as the policy
    lstm_state = False  # its carried state is an LSTM's (h, c), layers x envs x units (a chunk queue is not)

    def __init__(self, network: Any) -> None:
        self.network = network

    @property
    def carries_state(self) -> bool:
        """Whether it acts on a state it carries from step to step (its states are then Markov states)."""
        return False

    @property
    def observation_space(self) -> spaces.Space | None:
        return getattr(self.network, "observation_space", None)

    @property
    def action_space(self) -> spaces.Space:
        return self.network.action_space

    @property
    def discrete(self) -> bool:
        return isinstance(self.action_space, spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary)

    @property
    def family(self) -> str:
        """Which layers choose actions (:mod:`quarl_bench.families`): actor-critic, q, quantile, actor, ars, module."""
        from quarl_bench.families import family_of

        return family_of(self.network).name

    def act(self, observation: np.ndarray, state: Any = None, starts: np.ndarray | None = None, deterministic=True):
        """Actions for a batch and the state to pass next (SB3's ``predict``)."""
        return self.network.predict(observation, state, starts, deterministic)

    def greedy(self) -> Greedy:
        """Deterministic actions for a batch of the states the policy acts on (:meth:`acted_states`)."""
        return lambda observation: self.network.predict(observation, None, None, True)[0]

    def follower(self) -> Follower:
        """Deterministic actions along a trajectory another policy chooses: call it with every env each step."""
        greedy = self.greedy()
        return lambda observation, starts: np.asarray(greedy(observation))

    def acted_states(self, observation: np.ndarray, state: Any, starts: np.ndarray | None) -> np.ndarray:
        """What the policy acted on this step, one row per env (what calibration and margin samples keep)."""
        return observation

    def initial_state(self, envs: int) -> Any:
        """The state before the first step of ``envs`` envs (None: it carries none)."""
        return None

    def observations_of(self, states: np.ndarray) -> np.ndarray:
        """The observation part of states it acted on (:meth:`acted_states`)."""
        return states

    @property
    def categorical(self) -> bool:
        """Whether its actions are drawn from a categorical distribution it exposes (:meth:`probabilities`)."""
        return False

    def probabilities(self, observation: np.ndarray, state: Any, starts: np.ndarray | None) -> tuple[np.ndarray, Any]:
        """A categorical policy's action probabilities for a batch and its next state."""
        raise TypeError(f"a {type(self.network).__name__} exposes no action distribution")

    def decision_values(self, states: np.ndarray) -> np.ndarray | None:
        """Per-action scores whose argmax is the greedy action (None: continuous actions, or none to read); a
        predictor may give its own (``decision_values(states)``: the random policy's draws, masked on a masked env)."""
        own = getattr(self.network, "decision_values", None)
        return None if own is None else own(states)

    def acting_layers(self) -> list[tuple[str, nn.Module]]:
        """The Linear/Conv layers that choose actions (what PTQ quantizes), by name."""
        return []

    def eval(self) -> Policy:
        """Inference mode for a torch network (what ``predict`` sets on every call; the greedy fast path needs it)."""
        set_mode = getattr(self.network, "set_training_mode", None)
        if isinstance(self.network, nn.Module) and callable(set_mode):
            set_mode(False)
        return self


class SB3Policy(Policy):
    """A Stable-Baselines3 policy without state; greedy actions take the fast path where there is one."""

    kind = "sb3"

    @property
    def categorical(self) -> bool:
        from quarl_bench.families import find_family

        family = find_family(self.network)
        return family is not None and family.categorical(self.network)

    def probabilities(self, observation: np.ndarray, state: Any, starts: np.ndarray | None) -> tuple[np.ndarray, Any]:
        tensor, _ = self.network.obs_to_tensor(observation)
        return self.network.get_distribution(tensor).distribution.probs.cpu().numpy(), state

    def greedy(self) -> Greedy:
        from quarl_bench.zoo.greedy import greedy_function

        return greedy_function(self.network) or super().greedy()

    def decision_values(self, states: np.ndarray) -> np.ndarray | None:
        from quarl_bench.families import find_family

        family = find_family(self.network)
        if family is None or not isinstance(self.action_space, spaces.Discrete):
            return None  # a policy class no family knows acts through predict, with no values to read
        with torch.inference_mode():
            observations, _ = self.network.obs_to_tensor(states)
            values = family.decision_values(self.network, observations)
        return None if values is None else values.float().cpu().numpy()

    def acting_layers(self) -> list[tuple[str, nn.Module]]:
        from quarl_bench.quant.layers import acting_layers

        return list(acting_layers(self.network))


class DictSB3Policy(SB3Policy):
    """A Stable-Baselines3 policy on Dict observations (goal-conditioned, HER): it acts on the Dict, and the states
    it is asked about are flat rows, its keys concatenated in the order :mod:`~quarl_bench.observation_layout`
    declares (what calibration, the fixed-state set and an exported artifact hold)."""

    kind = "dict"

    def acted_states(self, observation: Any, state: Any, starts: np.ndarray | None) -> np.ndarray:
        from quarl_bench.observation_layout import layout_of

        layout = layout_of(self.observation_space)
        assert layout is not None  # as_policy gives this adapter to Dict observation spaces only
        return layout.flatten(observation) if isinstance(observation, dict) else np.array(observation)

    def greedy(self) -> Greedy:
        from quarl_bench.observation_layout import as_observations

        space = self.observation_space
        return lambda states: self.network.predict(as_observations(space, states), None, None, True)[0]

    def probabilities(self, observation: Any, state: Any, starts: np.ndarray | None) -> tuple[np.ndarray, Any]:
        from quarl_bench.observation_layout import as_observations

        return super().probabilities(as_observations(self.observation_space, observation), state, starts)

    def decision_values(self, states: np.ndarray) -> np.ndarray | None:
        from quarl_bench.observation_layout import as_observations

        return super().decision_values(as_observations(self.observation_space, states))


class ModulePolicy(SB3Policy):
    """A user's torch module (:class:`~quarl_bench.zoo.foreign.UserModulePolicy`): logits or actions."""

    kind = "module"


class ChunkedPolicy(ModulePolicy):
    """A chunking module (:class:`~quarl_bench.zoo.chunked.ChunkedModulePolicy`): its state is its chunk queue or
    ensemble; a state's greedy action is its chunk's first."""

    kind = "chunked"
    deploy_form = "chunked"  # its module as a graph, its loop in the artifact's runtime (deploy/chunk_artifact.py)

    @property
    def carries_state(self) -> bool:
        return True

    def greedy(self) -> Greedy:
        return lambda observation: self.network.predict(observation, None, None, True)[0]

    def acted_states(self, observation: Any, state: Any, starts: np.ndarray | None) -> np.ndarray:
        return self.network.flat(observation)  # a Dict observation's keys flat, as the module reads them

    def follower(self) -> Follower:
        return stateful_follower(self.network)


class OnnxGraphPolicy(ModulePolicy):
    """An ONNX graph: its torch twin where it is one MLP chain, else ONNX Runtime (a recurrent graph carries state)."""

    kind = "onnx"
    torch_layers = False
    deploy_form = "graph"  # exported as its own graph (its weights current), with an action output appended

    @property
    def carries_state(self) -> bool:
        return bool(getattr(self.network, "carries_state", False))

    def greedy(self) -> Greedy:
        if self.carries_state:
            return Policy.greedy(self)
        return super().greedy()

    def follower(self) -> Follower:
        return stateful_follower(self.network) if self.carries_state else super().follower()


class RecurrentSB3Policy(SB3Policy):
    """sb3-contrib's recurrent PPO: acts on its LSTM state too, so its states are Markov states ``[obs | h | c]``."""

    kind = "recurrent"
    deploy_form = "recurrent"  # one step of its actor, the state in and out
    lstm_state = True

    @property
    def carries_state(self) -> bool:
        return True

    def greedy(self) -> Greedy:
        from quarl_bench.families.recurrent import act_on

        return lambda markov: act_on(self.network, markov)

    def follower(self) -> Follower:
        return stateful_follower(self.network)

    def probabilities(self, observation: np.ndarray, state: Any, starts: np.ndarray | None) -> tuple[np.ndarray, Any]:
        from quarl_bench.families.recurrent import distribution_step, zero_state

        state = zero_state(self.network, len(observation)) if state is None else state
        distribution, state = distribution_step(self.network, observation, state, starts)
        return distribution.distribution.probs.cpu().numpy(), state

    def initial_state(self, envs: int) -> Any:
        from quarl_bench.families.recurrent import zero_state

        return zero_state(self.network, envs)

    def observations_of(self, states: np.ndarray) -> np.ndarray:
        from quarl_bench.families.recurrent import unpack

        return unpack(self.network, states)[0]

    def acted_states(self, observation: np.ndarray, state: Any, starts: np.ndarray | None) -> np.ndarray:
        from quarl_bench.families.recurrent import pack, started, zero_state

        return pack(observation, started(state or zero_state(self.network, len(observation)), starts))

    def decision_values(self, states: np.ndarray) -> np.ndarray | None:
        from quarl_bench.families.recurrent import distribution_step, unpack

        if not isinstance(self.action_space, spaces.Discrete):
            return None
        observations, state = unpack(self.network, states)  # each row from its own recurrent state
        distribution, _ = distribution_step(self.network, observations, state, None)
        return distribution.distribution.logits.float().cpu().numpy()


def stateful_follower(network: Any) -> Follower:
    """A stateful policy's greedy actions along another's trajectory: its own state carried from call to call,
    reset where an episode starts."""
    from quarl_bench.families.recurrent import StatefulGreedy

    return StatefulGreedy(network)


def as_policy(network: Any) -> Policy:
    """``network`` in its adapter (an adapter is returned as it is): the one place that asks what kind it is."""
    if isinstance(network, Policy):
        return network
    from stable_baselines3.common.policies import BasePolicy

    from quarl_bench.families.recurrent import is_recurrent
    from quarl_bench.zoo import foreign
    from quarl_bench.zoo.chunked import ChunkedModulePolicy

    if isinstance(network, foreign.UserOnnxPolicy):
        return OnnxGraphPolicy(network)
    if isinstance(network, ChunkedModulePolicy):
        return ChunkedPolicy(network)
    if isinstance(network, foreign.UserModulePolicy):
        return ModulePolicy(network)
    if is_recurrent(network):
        return RecurrentSB3Policy(network)
    if isinstance(network, BasePolicy):
        return DictSB3Policy(network) if isinstance(network.observation_space, spaces.Dict) else SB3Policy(network)
    if not hasattr(network, "predict"):
        raise TypeError(f"cannot act with a {type(network).__name__}: expected an SB3 policy or an object with predict")
    return StatefulPredictor(network) if getattr(network, "carries_state", False) else Policy(network)


class StatefulPredictor(Policy):
    """A predictor that carries its own state (a recurrent artifact, a recurrent reference behind a normaliser)."""

    @property
    def carries_state(self) -> bool:
        return True

    def follower(self) -> Follower:
        return stateful_follower(self.network)


class _ArtifactRun:
    """An artifact's runner with SB3's ``predict`` (what the evaluation loop calls on an adapter's network); a Dict
    observation is given to it flat, its keys concatenated as the artifact's layout declares."""

    def __init__(self, run: Any, action_space: spaces.Space, observation_space: spaces.Space | None = None) -> None:
        self.run, self.action_space, self.observation_space = run, action_space, observation_space
        self.carries_state = hasattr(run, "step")  # a recurrent runner steps a state

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        from quarl_bench.observation_layout import as_flat

        observation = as_flat(self.observation_space, observation)
        if not self.carries_state:
            return self.run(np.asarray(observation)), state
        from quarl_bench.families.recurrent import started

        restart = getattr(self.run, "started", started)  # a chunk runner's state is its own
        state = self.run.zero_state(len(observation)) if state is None else restart(state, episode_start)
        return self.run.step(np.asarray(observation), state)


class ArtifactPolicy(Policy):
    """An exported artifact's runner as a policy: deterministic actions on raw observations, no torch layers; a
    recurrent artifact's state carried from step to step and zeroed where an episode starts."""

    kind = "artifact"
    torch_layers = False

    def __init__(self, run: Any, action_space: spaces.Space, observation_space: spaces.Space | None = None) -> None:
        super().__init__(_ArtifactRun(run, action_space, observation_space))

    @property
    def carries_state(self) -> bool:
        return bool(self.network.carries_state)

    def follower(self) -> Follower:
        return stateful_follower(self.network) if self.carries_state else super().follower()


def artifact_policy(
    run: Any, action_space: spaces.Space, observation_space: spaces.Space | None = None
) -> ArtifactPolicy:
    """An artifact's runner in its adapter (``observation_space``: the env's, where a Dict is given to it flat)."""
    return ArtifactPolicy(run, action_space, observation_space)


class _NormalizedRun:
    """An SB3 policy behind its VecNormalize's statistics, with SB3's ``predict``."""

    def __init__(self, policy: Any, normalizer: Any) -> None:
        self.policy, self.normalizer = policy, normalizer
        self.action_space = policy.action_space
        self.carries_state = as_policy(policy).carries_state

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        if self.normalizer is not None:
            observation = self.normalizer.normalize_obs(observation)
        return self.policy.predict(observation, state, episode_start, deterministic)


class NormalizedPolicy(Policy):
    """An SB3 policy fed raw observations: it normalises them as its VecNormalize would (the fp32 reference of an
    artifact, which takes raw observations); a recurrent one carries its state (the action agreement then does)."""

    kind = "normalized"

    def __init__(self, policy: Any, normalizer: Any) -> None:
        super().__init__(_NormalizedRun(policy, normalizer))

    @property
    def carries_state(self) -> bool:
        return bool(self.network.carries_state)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        return self.network.predict(observation, state, episode_start, deterministic)

    def follower(self) -> Follower:
        return stateful_follower(self.network) if self.carries_state else super().follower()


def normalized_policy(policy: Any, normalizer: Any) -> NormalizedPolicy:
    """``policy`` fed raw observations, normalised by ``normalizer`` (None: as they come)."""
    return NormalizedPolicy(policy, normalizer)
