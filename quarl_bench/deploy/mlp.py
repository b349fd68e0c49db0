"""A deployable policy as a plain MLP: dense layers with their activations, the observation normalisation before
them and the action head after them. Backends that write their own kernels (``c-int8``) start from this."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from quarl_bench.errors import QuarlError

ACTIVATIONS = {nn.ReLU: "relu", nn.Tanh: "tanh"}


@dataclass(frozen=True)
class Dense:
    """``activation(weight @ x + bias)``; ``activation`` is ``relu``, ``tanh`` or ``none``."""

    weight: np.ndarray  # (out, in) float32
    bias: np.ndarray  # (out,) float32
    activation: str


@dataclass(frozen=True)
class Mlp:
    """Raw observation -> action: normalise (optional), dense layers, then the head.

    Heads: ``argmax`` (Discrete), ``quantile-argmax`` (QR-DQN: mean over ``quantiles`` rows, then argmax), ``clip``
    (a Gaussian mean clipped to [low, high]) and ``unscale`` (a [-1, 1] action mapped to [low, high])."""

    layers: tuple[Dense, ...]
    head: str
    obs_dim: int
    action_dim: int
    obs_mean: np.ndarray | None = None
    obs_scale: np.ndarray | None = None
    clip_obs: float = 0.0
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    quantiles: int = 1
    final: tuple[tuple, ...] = ()  # float ops after the last layer: ("tanh",), ("relu",), ("clamp", low, high)

    @property
    def normalized(self) -> bool:
        return self.obs_mean is not None

    def normalize(self, observations: np.ndarray) -> np.ndarray:
        """The first layer's input: the observations as the network sees them."""
        x = np.asarray(observations, dtype=np.float32).reshape(len(observations), -1)
        if not self.normalized:
            return x
        return normalized(x, {"mean": self.obs_mean, "scale": self.obs_scale, "clip": self.clip_obs})

    def trace(self, inputs: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Each layer's input and its output before the activation, from the network's ``inputs`` (observations
        after normalisation), in float32: what ``c-int8`` calibrates its ranges on."""
        x = torch.as_tensor(np.asarray(inputs, dtype=np.float32).reshape(len(inputs), -1))
        inputs, pre_activations = [], []
        for layer in self.layers:
            inputs.append(x.numpy())
            pre = torch.nn.functional.linear(x, torch.as_tensor(layer.weight), torch.as_tensor(layer.bias))
            pre_activations.append(pre.numpy())
            x = {"relu": torch.relu, "tanh": torch.tanh}.get(layer.activation, lambda v: v)(pre)
        return inputs, pre_activations

    def scores(self, observations: np.ndarray) -> np.ndarray:
        """The last layer's output after the final float ops, in float32 (the head's input)."""
        x = torch.as_tensor(self.trace(self.normalize(observations))[1][-1])
        for op in self.final:
            x = torch.clamp(x, op[1], op[2]) if op[0] == "clamp" else getattr(torch, op[0])(x)
        return x.numpy()


def normalized(observations: np.ndarray, statistics: dict) -> np.ndarray:
    """VecNormalize's statistics applied: clip((obs - mean) * scale, -clip, clip), in float32."""
    mean, scale = np.asarray(statistics["mean"], np.float32), np.asarray(statistics["scale"], np.float32)
    x = (np.asarray(observations, dtype=np.float32) - mean) * scale
    return np.clip(x, -statistics["clip"], statistics["clip"]).astype(np.float32)


def as_mlp(module) -> Mlp:
    """The :class:`~quarl_bench.deploy.export.DeployablePolicy` as an :class:`Mlp`.

    :raises QuarlError: in one line, for a policy that is not a plain MLP (a CNN, an image observation, another
        activation, a features extractor with layers, an ONNX graph).
    """
    from quarl_bench.deploy.export import DeployablePolicy

    if not isinstance(module, DeployablePolicy) and isinstance(getattr(module, "net", None), nn.Sequential):
        modules, head, quantiles = list(module.net), "argmax", 1  # a greedy MLP (QuaRL Table 4's synthetic policies)
        return _built(modules, head, quantiles, None)
    if not isinstance(module, DeployablePolicy):
        raise QuarlError("c-int8 needs a torch policy: expected an SB3 agent or a torch module, not an ONNX graph")
    if module.image:
        raise QuarlError("c-int8 writes MLP policies only: this policy takes images (a CNN); expected a vector policy")
    modules, head, quantiles = _acting_modules(module)
    return _built(modules, head, quantiles, module)


def _built(modules: list[nn.Module], head: str, quantiles: int, module) -> Mlp:
    layers: list[Dense] = []
    flat = _flattened(modules)
    last_linear = max((i for i, item in enumerate(flat) if isinstance(item, nn.Linear)), default=-1)
    final: list[tuple] = []
    for index, item in enumerate(flat):
        if isinstance(item, nn.Linear):
            bias = item.bias if item.bias is not None else torch.zeros(item.out_features)
            layers.append(Dense(_array(item.weight), _array(bias), "none"))
        elif index > last_linear and (type(item) in ACTIVATIONS or isinstance(item, nn.Hardtanh)):
            final.append(_float_op(item))
        elif type(item) in ACTIVATIONS and layers and layers[-1].activation == "none":
            last = layers.pop()
            layers.append(Dense(last.weight, last.bias, ACTIVATIONS[type(item)]))
        elif not isinstance(item, (nn.Flatten, nn.Identity)):
            raise QuarlError(
                f"c-int8 writes MLP policies only: this policy has a {type(item).__name__} layer; expected Linear "
                "layers with ReLU or Tanh"
            )
    if not layers:
        raise QuarlError("c-int8 writes MLP policies only: this policy has no Linear layer")
    normalizer = {}
    if module is not None and module.normalize:
        normalizer = {
            "obs_mean": module.obs_mean.numpy().astype(np.float32),
            "obs_scale": module.obs_scale.numpy().astype(np.float32),
            "clip_obs": module.clip_obs,
        }
    discrete = module is None or module.discrete
    bounds = {} if discrete else {"low": module.low.numpy(), "high": module.high.numpy()}
    return Mlp(
        tuple(layers),
        head,
        int(layers[0].weight.shape[1]),
        1 if discrete else int(np.prod(module.low.shape)),
        quantiles=quantiles,
        final=tuple(final),
        **normalizer,
        **bounds,
    )


def _float_op(item: nn.Module) -> tuple:
    if isinstance(item, nn.Hardtanh) and not isinstance(item, (nn.ReLU6,)):
        return ("clamp", float(item.min_val), float(item.max_val))
    return (ACTIVATIONS[type(item)],)


def _flattened(modules: list[nn.Module]) -> list[nn.Module]:
    """Nested ``nn.Sequential`` containers opened, in order."""
    flat: list[nn.Module] = []
    for item in modules:
        flat += _flattened(list(item)) if isinstance(item, nn.Sequential) else [item]
    return flat


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy().astype(np.float32)


def _acting_modules(module) -> tuple[list[nn.Module], str, int]:
    """The acting path's modules in order, the head and the number of quantiles."""
    policy, family = module.policy, module.family
    if family == "actor-critic":
        _plain_extractor(policy.pi_features_extractor)
        squashed = getattr(policy, "squash_output", False)
        return [*policy.mlp_extractor.policy_net, policy.action_net], _continuous_head(module, squashed), 1
    if family == "q":
        _plain_extractor(policy.q_net.features_extractor)
        return list(policy.q_net.q_net), "argmax", 1
    if family == "quantile":
        net = policy.quantile_net
        _plain_extractor(net.features_extractor)
        return list(net.quantile_net), "quantile-argmax", int(net.n_quantiles)
    if family == "actor":
        actor = policy.actor
        _plain_extractor(actor.features_extractor)
        if hasattr(actor, "latent_pi"):  # SAC, TQC: tanh of the Gaussian mean, unscaled
            return [*actor.latent_pi, actor.mu, nn.Tanh()], "unscale", 1
        return list(actor.mu), "unscale", 1  # ddpg, td3: mu ends in tanh
    if isinstance(policy.module, nn.Sequential):
        return list(policy.module), "argmax" if module.discrete else "clip", 1
    raise QuarlError(
        f"c-int8 writes MLP policies only: expected an nn.Sequential of Linear/ReLU/Tanh, got a "
        f"{type(policy.module).__name__}"
    )


def _continuous_head(module, squashed: bool) -> str:
    if module.discrete:
        return "argmax"
    return "unscale" if squashed else "clip"


def _plain_extractor(extractor: nn.Module) -> None:
    if any(isinstance(m, (nn.Linear, nn.Conv2d)) for m in extractor.modules()):
        raise QuarlError(
            f"c-int8 writes MLP policies only: this policy's features extractor is a {type(extractor).__name__} "
            "with layers (a CNN); expected a flattening extractor"
        )
