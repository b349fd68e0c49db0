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
        layer_inputs: list[np.ndarray] = []
        pre_activations: list[np.ndarray] = []
        for layer in self.layers:
            layer_inputs.append(x.numpy())
            pre = torch.nn.functional.linear(x, torch.as_tensor(layer.weight), torch.as_tensor(layer.bias))
            pre_activations.append(pre.numpy())
            x = {"relu": torch.relu, "tanh": torch.tanh}.get(layer.activation, lambda v: v)(pre)
        return layer_inputs, pre_activations

    def scores(self, observations: np.ndarray) -> np.ndarray:
        """The last layer's output after the final float ops, in float32 (the head's input)."""
        x = torch.as_tensor(self.trace(self.normalize(observations))[1][-1])
        for op in self.final:
            x = apply_float_op(op, x)
        return x.numpy()


def apply_float_op(op: tuple, x: torch.Tensor) -> torch.Tensor:
    """One of the float ops after the last layer: ``tanh``, ``relu``, ``clamp``, ``scale`` or ``offset``."""
    if op[0] == "clamp":
        return torch.clamp(x, op[1], op[2])
    if op[0] == "scale":
        return x * torch.as_tensor(op[1], dtype=torch.float32)
    if op[0] == "offset":
        return x + torch.as_tensor(op[1], dtype=torch.float32)
    return getattr(torch, op[0])(x)


def normalized(observations: np.ndarray, statistics: dict) -> np.ndarray:
    """VecNormalize's statistics applied: clip((obs - mean) * scale, -clip, clip), in float32."""
    mean, scale = np.asarray(statistics["mean"], np.float32), np.asarray(statistics["scale"], np.float32)
    x = (np.asarray(observations, dtype=np.float32) - mean) * scale
    return np.clip(x, -statistics["clip"], statistics["clip"]).astype(np.float32)


def as_mlp(module) -> Mlp:
    """A deployable form (``DeployablePolicy``, or a form that writes its own chain such as QuaRL Table 4's
    synthetic policies) as an :class:`Mlp`.

    :raises QuarlError: in one line, for a policy that is not a plain MLP (a CNN, an image observation, another
        activation, a features extractor with layers, an ONNX graph).
    """
    if not module.torch_layers:
        raise QuarlError(
            "c-int8 needs a torch policy: expected an SB3 agent, a torch module or an ONNX graph that is one MLP chain"
        )
    if module.image:
        raise QuarlError("c-int8 writes MLP policies only: this policy takes images (a CNN); expected a vector policy")
    modules, head, quantiles = module.written_chain()
    return _built(modules, head, quantiles, module)


def _built(modules: list[nn.Module], head: str, quantiles: int, module) -> Mlp:
    layers: list[Dense] = []
    flat = _flattened(modules)
    last_linear = max((i for i, item in enumerate(flat) if isinstance(item, nn.Linear)), default=-1)
    final: list[tuple] = []
    for index, item in enumerate(flat):
        if isinstance(item, tuple):  # a traced constant op: scale or offset, in float after the last layer
            if index < last_linear:
                raise QuarlError(
                    f"c-int8 writes MLP chains only: this module's {item[0]} comes before a Linear layer; expected "
                    "scales and offsets after the last one"
                )
            final.append(item)
        elif isinstance(item, nn.Linear):
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
    if module.normalize:
        normalizer = {
            "obs_mean": module.obs_mean.numpy().astype(np.float32),
            "obs_scale": module.obs_scale.numpy().astype(np.float32),
            "clip_obs": module.clip_obs,
        }
    discrete = module.discrete
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
    if isinstance(item, nn.Hardtanh):
        return ("clamp", float(item.min_val), float(item.max_val))
    return (ACTIVATIONS[type(item)],)


def _flattened(modules: list[nn.Module]) -> list[nn.Module]:
    """Nested ``nn.Sequential`` containers opened, in order."""
    flat: list = []
    for item in modules:
        flat += _flattened(list(item)) if isinstance(item, nn.Sequential) else [item]
    return flat


CHAIN_TEXT = "Linear, ReLU, Tanh, a constant scale or offset, clamp"


def traced_chain(module: nn.Module) -> list:
    """A torch module's forward as a chain of modules and constant ops (torch.fx): an actor class with a
    ``scale * tanh(...)`` head exports as an ``nn.Sequential`` does.

    :raises QuarlError: in one line, naming the op outside the chain (or why it cannot be traced).
    """
    import functools
    import operator

    import torch.fx as fx

    if isinstance(module, nn.Sequential):
        return list(module)
    try:
        graph = fx.symbolic_trace(module).graph
    except Exception as error:  # noqa: BLE001 - fx raises many kinds on data-dependent control flow
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise QuarlError(
            f"c-int8 cannot trace this {type(module).__name__} (torch.fx: {text}); expected a "
            f"forward that is a chain of {CHAIN_TEXT}"
        ) from None
    named = dict(module.named_modules())
    functions = {torch.relu: nn.ReLU, torch.nn.functional.relu: nn.ReLU, torch.tanh: nn.Tanh}
    functions[torch.nn.functional.tanh] = nn.Tanh
    methods = {"relu": nn.ReLU, "tanh": nn.Tanh}
    chain: list = []
    current = None
    attributes: dict = {}
    for node in graph.nodes:
        if node.op == "placeholder":
            current = current or node
            continue
        if node.op == "output":
            break
        if node.op == "get_attr":  # a parameter or buffer: a constant operand of a later scale or offset
            attributes[node] = functools.reduce(getattr, node.target.split("."), module)
            continue
        label = _node_label(node)
        tensors = [a for a in node.args if isinstance(a, fx.Node) and a not in attributes]
        constants = [value for a in node.args if (value := _constant(a, attributes)) is not None]
        if tensors != [current]:
            raise QuarlError(
                f"c-int8 writes MLP chains only: this module's {label} does not continue one chain "
                f"(branches or several inputs); expected a chain of {CHAIN_TEXT}"
            )
        if node.op == "call_module" and isinstance(
            named[node.target], (nn.Linear, nn.ReLU, nn.Tanh, nn.Hardtanh, nn.Identity, nn.Flatten, nn.Sequential)
        ):
            chain.append(named[node.target])
        elif node.op == "call_function" and node.target in functions:
            chain.append(functions[node.target]())
        elif node.op == "call_method" and node.target in methods:
            chain.append(methods[node.target]())
        elif node.op == "call_function" and node.target in (operator.mul, operator.truediv) and len(constants) == 1:
            value = constants[0] if node.target is operator.mul else tuple(1.0 / v for v in constants[0])
            chain.append(("scale", value))
        elif node.op == "call_function" and node.target in (operator.add, operator.sub) and len(constants) == 1:
            sign = -1.0 if node.target is operator.sub and node.args[0] is current else 1.0
            if node.target is operator.sub and node.args[0] is not current:
                raise QuarlError(
                    f"c-int8 writes MLP chains only: this module's {label} negates the chain; "
                    f"expected a chain of {CHAIN_TEXT}"
                )
            chain.append(("offset", tuple(sign * v for v in constants[0])))
        elif node.target in (torch.clamp, torch.clip, "clamp", "clip") and node.kwargs.keys() <= {"min", "max"}:
            low, high = (list(node.args[1:]) + [None, None])[:2]
            low, high = node.kwargs.get("min", low), node.kwargs.get("max", high)
            chain.append(
                nn.Hardtanh(-float("inf") if low is None else float(low), float("inf") if high is None else float(high))
            )
        else:
            raise QuarlError(f"c-int8 writes MLP chains only: this module calls {label}; expected {CHAIN_TEXT}")
        current = node
    return chain


def _constant(argument, attributes: dict) -> tuple[float, ...] | None:
    """A constant operand as a tuple of floats (one, or one per output), else None."""
    if isinstance(argument, int | float) and not isinstance(argument, bool):
        return (float(argument),)
    if argument in attributes:
        return tuple(float(v) for v in attributes[argument].detach().float().reshape(-1))
    return None


def _node_label(node) -> str:
    """An fx node as a person reads it: ``torch.sigmoid``, ``Softmax (self.head)``, ``.view``."""
    if node.op == "call_module":
        return f"{type(node.graph.owning_module.get_submodule(node.target)).__name__} (self.{node.target})"
    if node.op == "call_method":
        return f".{node.target}()"
    target = node.target
    return f"{getattr(target, '__module__', '') or ''}.{getattr(target, '__name__', str(target))}".lstrip(".")


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy().astype(np.float32)


def acting_modules(module) -> tuple[list[nn.Module], str, int]:
    """The acting path's modules in order (batch norms folded), the head and the number of quantiles."""
    from quarl_bench.quant.fold import folded_chain

    chain = module.family.acting_chain(module.policy)
    head = chain.head or _continuous_head(module, module.family.squashed(module.policy))
    if chain.traced:
        return traced_chain(chain.modules[0]), head, chain.quantiles
    _plain_extractor(chain.extractor)
    modules, _ = folded_chain(list(chain.modules), [])
    return modules, head, chain.quantiles


def _continuous_head(module, squashed: bool) -> str:
    if module.discrete:
        return "argmax"
    return "unscale" if squashed else "clip"


def _plain_extractor(extractor: nn.Module | None) -> None:
    if extractor is not None and any(isinstance(m, (nn.Linear, nn.Conv2d)) for m in extractor.modules()):
        raise QuarlError(
            f"c-int8 writes MLP policies only: this policy's features extractor is a {type(extractor).__name__} "
            "with layers (a CNN); expected a flattening extractor"
        )
