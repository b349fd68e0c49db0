"""Policy families: which network of a policy chooses its actions and how, one module per family.

A family is read from the policy object (never from an algorithm's name): ``actor_critic`` (PPO, A2C, TRPO and
recurrent PPO: any ``ActorCriticPolicy``), ``quantile`` (QR-DQN), ``q_values`` (DQN), ``ars`` (one action network),
``actor`` (DDPG, TD3, SAC, TQC, CrossQ: a separate actor) and ``module`` (a user's torch module or an ONNX graph,
``zoo/foreign.py``). Quantization (its acting layers), export (the deploy forward and the C artifact's chain),
hardening (the differentiable decision output), the greedy fast path and decision values all ask the family, so a
policy class none of these fits is one new module here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.registry import Registry

# A policy object of some family. Its sub-networks are attributes that torch's stubs type as ``Tensor | Module``
# (``nn.Module.__getattr__``), so a family reads them untyped; its ``matches`` says which objects it takes.
PolicyObject = Any
# What a features extractor takes: a tensor, or a Dict policy's tensor per key (its CombinedExtractor concatenates)
NetworkInput = torch.Tensor | dict[str, torch.Tensor]


@dataclass(frozen=True)
class Output:
    """What a policy's decision is made from: ``values`` (Q-values or mean quantiles: argmax), ``logits`` (a
    categorical distribution) or ``actions`` (continuous, scaled to [-1, 1])."""

    kind: str
    tensor: torch.Tensor


@dataclass(frozen=True)
class ActingChain:
    """The acting path as a chain of modules, for artifacts that are written layer by layer (the C artifacts).

    :param extractor: the features extractor before the chain (it must only flatten), None for none.
    :param modules: the chain (batch-norm layers are folded by the reader); with ``traced``, one module to trace.
    :param head: what turns the chain's output into an action, "" for the default (argmax, clip or unscale).
    :param quantiles: outputs per action averaged before the argmax (QR-DQN's quantiles).
    """

    extractor: nn.Module | None
    modules: tuple[nn.Module, ...]
    head: str = ""
    quantiles: int = 1
    traced: bool = False


class PolicyFamily:
    """One family of policies; a subclass answers for its policies (the defaults: no fast path, no values).

    :cvar name: its name (``actor-critic``, ``q``...), as ``Policy.family`` reports it.
    :cvar acting: the sub-modules that choose actions (QuaRL's paper selection).
    :cvar quarl_code: the original QuaRL code's selection: (weights-only prefixes, weights-and-biases prefixes).
    :cvar raw_observations: it takes observations as they come (no image scaling in the deployable policy).
    """

    name = ""
    acting: tuple[str, ...] = ()
    quarl_code: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    raw_observations = False

    def matches(self, policy: PolicyObject) -> bool:
        raise NotImplementedError

    def acting_prefixes(self, policy: PolicyObject) -> tuple[str, ...]:
        """The acting sub-modules of this policy (a family may drop one that the policy does not act through)."""
        return self.acting

    def squashed(self, policy: PolicyObject) -> bool:
        """Whether its continuous actions come out in [-1, 1] to be unscaled to the bounds (else clipped)."""
        return bool(getattr(policy, "squash_output", False))

    def scores(self, policy: PolicyObject, x: NetworkInput) -> torch.Tensor:
        """The network's output on preprocessed observations (a Dict policy's per key): logits / values, or the
        continuous action."""
        raise NotImplementedError

    def acting_chain(self, policy: PolicyObject) -> ActingChain:
        raise NotImplementedError

    def decision(self, policy: PolicyObject, observations: torch.Tensor) -> Output:
        """The differentiable output its deterministic action comes from."""
        raise NotImplementedError

    def decision_values(self, policy: PolicyObject, observations: torch.Tensor) -> torch.Tensor | None:
        """A discrete policy's per-action scores whose argmax is the greedy action (None: none to read)."""
        return None

    def categorical(self, policy: PolicyObject) -> bool:
        """Whether it exposes a categorical action distribution."""
        return False

    def torch_greedy(self, policy: PolicyObject) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """SB3's deterministic discrete action for a batch tensor without ``predict``'s wrapper; None: none known."""
        return None

    def plain_chain(self, policy: PolicyObject) -> list[nn.Module] | None:
        """Linear/activation modules from a flat observation to the outputs whose argmax is the action, or None."""
        return None

    def predicts_continuous(self, policy: PolicyObject) -> bool:
        """Whether its own ``_predict`` plus ``predict``'s clipping or unscaling gives SB3's continuous actions."""
        return False

    def play(self, policy: PolicyObject, states: np.ndarray) -> None:
        """Act on stored ``states`` exactly as evaluation acts (for hooks to see): a recurrent policy's states are
        Markov states (:mod:`quarl_bench.families.recurrent`), a Dict policy's flat rows
        (:mod:`quarl_bench.observation_layout`)."""
        from quarl_bench.observation_layout import as_observations

        policy.predict(as_observations(getattr(policy, "observation_space", None), states), deterministic=True)

    def state_lstm(self, policy: PolicyObject) -> nn.LSTM | None:
        """The LSTM whose state it carries from step to step; None: it carries none."""
        return None

    def torch_refusal(self, policy: PolicyObject) -> str:
        """Why its layers cannot be calibrated or hooked in torch ('' when they can)."""
        return ""


FAMILIES: Registry[PolicyFamily] = Registry(
    "policy family",
    package="quarl_bench.families",
    first=("actor_critic", "quantile", "q_values", "ars", "actor", "module"),  # asked in this order
)


def register_family(family: PolicyFamily) -> PolicyFamily:
    """Register a family (a family module's one call)."""
    return FAMILIES.add(family.name, family)


def find_family(policy: PolicyObject) -> PolicyFamily | None:
    """The first registered family that ``policy`` belongs to, or None."""
    FAMILIES.load(every=True)
    return next((family for family in FAMILIES.entries.values() if family.matches(policy)), None)


def family_of(policy: PolicyObject) -> PolicyFamily:
    """The family ``policy`` belongs to.

    :raises QuarlError: for a policy of none of them.
    """
    family = find_family(policy)
    if family is None:
        raise QuarlError(
            f"cannot tell which layers of a {type(policy).__name__} choose actions: expected an SB3 actor-critic, "
            "DQN, QR-DQN, DDPG/TD3/SAC/TQC policy, a torch module or an ONNX policy"
        )
    return family


def distribution_output(policy: PolicyObject, distribution) -> Output:
    """An actor-critic's decision output from its action distribution (a recurrent policy's too): the logits, or
    the deterministic action scaled to [-1, 1]."""
    if isinstance(policy.action_space, spaces.Discrete):
        return Output("logits", distribution.distribution.logits)
    return Output("actions", scaled_actions(policy, distribution.mode()))


def network_output(policy: PolicyObject, out: torch.Tensor) -> Output:
    """A network's raw output as its decision: logits for discrete actions, else the actions scaled to [-1, 1]."""
    if isinstance(policy.action_space, spaces.Discrete):
        return Output("logits", out)
    return Output("actions", scaled_actions(policy, out))


def scaled_actions(policy: PolicyObject, actions: torch.Tensor) -> torch.Tensor:
    """Unsquashed Box actions clipped to the space, as the env receives them, then scaled to [-1, 1]."""
    space = policy.action_space
    if getattr(policy, "squash_output", False) or not isinstance(space, spaces.Box):
        return actions
    low = torch.as_tensor(space.low, dtype=actions.dtype)
    high = torch.as_tensor(space.high, dtype=actions.dtype)
    clipped = torch.maximum(torch.minimum(actions, high), low)
    return 2 * (clipped - low) / (high - low) - 1
