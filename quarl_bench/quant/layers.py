"""Which tensors of a policy a QuantSpec quantizes: the paper's selection or the original QuaRL code's.

``paper`` (default): the weights of the acting network only, as QuaRL's paper describes: the actor and its
features extractor for PPO/A2C (shared with the critic by default), the Q-network for DQN/QR-DQN, the actor for
DDPG/TD3/SAC. Critics, value heads, target networks are untouched; biases only with ``quantize_bias``.

``quarl-code``: what harvard-edge/QuaRL ``baseline/new_ptq.py`` (commit 8002538) really selected, by substring of
stable-baselines (TF1) variable names (``../shared/paper/quarl_code_layers.md``), mapped onto SB3's networks:

- DQN/QR-DQN: every variable under ``action_value``/``state_value`` with a ``w`` (weights, not biases), in the
  online *and* target networks -> every weight of ``q_net``/``quantile_net`` and of its target; no bias.
- Everything else: a ``pi`` variable only if it contains ``w`` (policy weights: ``pi_fc*/w``, ``pi/w``), and every
  variable without ``pi``, weights and biases (value head, shared CNN and ``fc1``, the critic):
  PPO/A2C -> policy-net and action-net weights; value-net, value-head and features-extractor weights and biases.
  DDPG/TD3/SAC -> the actor's variables are ``pi/fc0/kernel`` (``pi``, no ``w``), so **no actor tensor**; the
  critic and its target, weights and biases. The acting network of these agents is left in fp32.

Each policy family (:mod:`quarl_bench.families`) names its sub-modules for both selections (``acting``,
``quarl_code``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from stable_baselines3.common.policies import BasePolicy
from torch import nn

from quarl_bench.families import family_of

LAYER_TYPES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
Layer = nn.Linear | nn.Conv1d | nn.Conv2d | nn.Conv3d  # a layer PTQ quantizes
CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
LSTM_GATES = 4  # PyTorch stacks an LSTM's input, forget, cell and output gates in one tensor


@dataclass(frozen=True)
class Selected:
    """One tensor to quantize: ``name`` is its state-dict name (``q_net.q_net.0.weight``). An LSTM's tensors
    (``weight_ih_l0``, ``weight_hh_l0``, ...) stack its 4 gates: each gate is a layer of its own, so a per-tensor
    grid is one grid per gate and a per-channel grid one per row (``gates``)."""

    name: str
    module: nn.Module
    kind: str  # the attribute: "weight" or "bias", or an LSTM's "weight_ih_l0", "bias_hh_l0", ...

    @property
    def is_conv(self) -> bool:
        return isinstance(self.module, CONV_TYPES)

    @property
    def gates(self) -> int:
        return LSTM_GATES if isinstance(self.module, nn.LSTM) else 1


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _layers(policy: nn.Module, keep: Callable[[str], bool]) -> Iterator[tuple[str, Layer]]:
    """Every Linear/Conv layer whose name ``keep`` accepts, once, under the first such name (a shared features
    extractor appears under several names)."""
    seen: set[int] = set()
    for name, module in policy.named_modules(remove_duplicate=False):
        if isinstance(module, LAYER_TYPES) and id(module) not in seen and keep(name):
            seen.add(id(module))
            yield name, module


def _acting_filter(policy: nn.Module) -> Callable[[str], bool]:
    """Names under the sub-modules its family acts through (``quarl_bench.families``)."""
    prefixes = family_of(policy).acting_prefixes(policy)
    return lambda name: _under(name, prefixes)


def acting_layers(policy: nn.Module) -> Iterator[tuple[str, Layer]]:
    """Yield ``(name, module)`` for each Linear/Conv layer that the policy acts with, each once, in module order:
    custom ``net_arch``, activations and features extractors included (any Linear/Conv inside them)."""
    yield from _layers(policy, _acting_filter(policy))


def acting_lstms(policy: nn.Module) -> list[tuple[str, nn.LSTM]]:
    """``(name, module)`` for each LSTM the policy acts through (a recurrent actor's), in module order: the first
    acting layers, as their input is the observation."""
    keep = _acting_filter(policy)
    return [(name, module) for name, module in policy.named_modules() if isinstance(module, nn.LSTM) and keep(name)]


def unquantized_modules(policy: nn.Module) -> list[str]:
    """Acting modules holding parameters of their own that PTQ leaves in fp32 (LayerNorm, Embedding, LSTM, ...):
    ``name (Type)``, each once. An actor's batch-norm layers are not among them: PTQ folds them into the Linear
    after them (:mod:`quarl_bench.quant.fold`)."""
    from quarl_bench.quant.fold import is_batch_norm

    keep, seen, found = _acting_filter(policy), set(), []
    for name, module in policy.named_modules(remove_duplicate=False):
        if is_batch_norm(module) and name.startswith("actor.latent_pi."):
            continue
        own = list(module.parameters(recurse=False))
        quantized = isinstance(module, (*LAYER_TYPES, nn.LSTM))  # an LSTM's gates are quantized (lstm_tensors)
        if own and keep(name) and not quantized and id(module) not in seen:
            seen.add(id(module))
            found.append(f"{name} ({type(module).__name__})")
    return found


def lstm_tensors(policy: nn.Module, keep: Callable[[str], bool], biases: Callable[[str], bool]) -> list[Selected]:
    """The weights (and, where ``biases`` accepts the name, biases) of every LSTM whose name ``keep`` accepts."""
    selected = []
    for name, module in policy.named_modules():
        if isinstance(module, nn.LSTM) and keep(name):
            for layer in range(module.num_layers):
                kinds = [f"weight_ih_l{layer}", f"weight_hh_l{layer}"]
                kinds += [f"bias_ih_l{layer}", f"bias_hh_l{layer}"] if module.bias and biases(name) else []
                selected += [Selected(f"{name}.{kind}", module, kind) for kind in kinds]
    return selected


def selected_tensors(policy: BasePolicy, layers: str = "paper", quantize_bias: bool = False) -> list[Selected]:
    """The tensors a spec with this layer mode quantizes, in module order (an LSTM's first)."""
    if layers == "paper":
        selected = lstm_tensors(policy, _acting_filter(policy), lambda _: quantize_bias)
        for name, module in acting_layers(policy):
            selected.append(Selected(f"{name}.weight", module, "weight"))
            if quantize_bias and module.bias is not None:
                selected.append(Selected(f"{name}.bias", module, "bias"))
        return selected
    weights_only, with_bias = family_of(policy).quarl_code
    selected = lstm_tensors(
        policy, lambda n: _under(n, weights_only) or _under(n, with_bias), lambda n: _under(n, with_bias)
    )
    for name, module in _layers(policy, lambda n: _under(n, weights_only) or _under(n, with_bias)):
        selected.append(Selected(f"{name}.weight", module, "weight"))
        if _under(name, with_bias) and module.bias is not None:
            selected.append(Selected(f"{name}.bias", module, "bias"))
    return selected
