"""The behaviour policy of quantized rollouts: a copy of the fp32 learner's policy whose acting weights are rounded
to the rollout precision, refreshed from the learner after every update.

Two backends. ``torch`` rounds the acting layers' weights onto the PTQ grid (``quant.quantize.quantize_tensor``: the
same grid and formats as ``quarl-bench run --bits``) and acts in torch. ``onnxruntime`` (int8 only) acts through ORT's
int8 kernels (``MatMulInteger``, activations quantized per call), the graph ActorQ's int8 actors run.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import FlattenExtractor
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.quant.layers import selected_tensors
from quarl_bench.quant.quantize import clone_policy, quantize_tensor
from quarl_bench.training.mismatch import torch_distribution
from quarl_bench.training.options import ROLLOUT_BACKENDS
from quarl_bench.types import QuantSpec

ONNX_ACTIVATIONS = {nn.ReLU: "Relu", nn.Tanh: "Tanh"}


class BehaviourPolicy:
    """Acts for the learner's ``policy`` at ``precision``; :meth:`refresh` re-quantizes from its current weights.

    At fp32 it is the learner's policy itself, so fp32 rollouts act exactly as SB3's.
    """

    def __init__(self, policy: ActorCriticPolicy, precision: str, backend: str = "torch") -> None:
        if backend not in ROLLOUT_BACKENDS:
            raise QuarlError(f"bad rollout backend {backend!r}: expected one of {', '.join(ROLLOUT_BACKENDS)}")
        self.fp32, self.spec, self.backend = policy, QuantSpec(precision), backend
        if backend == "onnxruntime":
            check_onnx_actor(policy, self.spec.precision)
        self.copy = policy if self.spec.is_identity else clone_policy(policy)
        self.tensors = [] if self.spec.is_identity else selected_tensors(self.copy, "paper")
        self.session: Any = None
        self.refresh()

    def refresh(self) -> None:
        """Take the learner's current weights and round the acting layers' again."""
        if self.copy is self.fp32:
            return
        self.copy.load_state_dict(self.fp32.state_dict())
        self.copy.set_training_mode(False)
        if self.backend == "onnxruntime":
            from quarl_bench.actorq.onnx_policy import OrtActorPolicy, int8_onnx_model

            state, activation = actor_state(self.copy)
            self.session = OrtActorPolicy(int8_onnx_model(state, squash=False, activation=activation))
            return
        with torch.no_grad():
            for tensor in self.tensors:
                param = getattr(tensor.module, tensor.kind)
                param.copy_(quantize_tensor(param.detach().clone(), self.spec, tensor.is_conv, tensor.gates))

    def reset_noise(self, n_envs: int) -> None:
        """New gSDE exploration matrices (sampled from the behaviour copy's own, fp32, ``log_std``)."""
        self.copy.reset_noise(n_envs)

    def distribution(self, observations: torch.Tensor) -> Distribution:
        if self.session is None:
            return self.copy.get_distribution(observations)
        output = self.session(observations)
        if isinstance(self.copy.action_space, spaces.Discrete):
            return self.copy.action_dist.proba_distribution(action_logits=output)
        return self.copy.action_dist.proba_distribution(output, self.copy.log_std)

    def act(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.distributions.Distribution]:
        """Sampled actions (SB3's shape), their log-probabilities under the behaviour policy, and its distribution."""
        dist = self.distribution(observations)
        actions = dist.get_actions(deterministic=False)
        log_probs = dist.log_prob(actions)
        actions = actions.reshape((-1, *(self.copy.action_space.shape or ())))
        return actions, log_probs, torch_distribution(dist)


def check_onnx_actor(policy: ActorCriticPolicy, precision: str) -> None:
    """ORT rollouts need int8 and an MLP actor: flat observations, Linear layers with ReLU/Tanh, no gSDE.

    :raises QuarlError: naming what does not fit.
    """
    if precision != "int8":
        raise QuarlError(f"bad rollout precision {precision!r} for --rollout-backend onnxruntime: expected int8")
    if getattr(policy, "use_sde", False):
        raise QuarlError(
            "--rollout-backend onnxruntime: this policy explores with gSDE, which needs its latent features "
            "(expected --rollout-backend torch)"
        )
    if not isinstance(policy.features_extractor, FlattenExtractor) or not isinstance(
        policy.action_space, spaces.Discrete | spaces.Box
    ):
        raise QuarlError(
            "--rollout-backend onnxruntime plays MLP policies on flat observations with Discrete or Box actions "
            "(expected --rollout-backend torch)"
        )
    actor_state(policy)


def actor_state(policy: ActorCriticPolicy) -> tuple[dict[str, torch.Tensor], str]:
    """The actor (policy net, then action net) as a ``Sequential``-style state dict (``0.weight``, ``2.weight``...)
    and its activation's ONNX op."""
    head = policy.action_net
    if not isinstance(head, nn.Linear):
        raise QuarlError(f"--rollout-backend onnxruntime: the action net is a {type(head).__name__} (expected Linear)")
    layers = [m for m in policy.mlp_extractor.policy_net if isinstance(m, nn.Linear)] + [head]
    activations = {type(m) for m in policy.mlp_extractor.policy_net if not isinstance(m, nn.Linear)}
    if len(activations) > 1 or not activations <= set(ONNX_ACTIVATIONS):
        raise QuarlError(
            f"--rollout-backend onnxruntime: the actor's activations are {sorted(a.__name__ for a in activations)} "
            "(expected ReLU or Tanh throughout)"
        )
    state = {}
    for i, layer in enumerate(layers):
        bias = layer.bias if layer.bias is not None else torch.zeros(layer.out_features)
        state[f"{2 * i}.weight"], state[f"{2 * i}.bias"] = layer.weight.detach(), bias.detach()
    return state, ONNX_ACTIVATIONS[next(iter(activations))] if activations else "Relu"
