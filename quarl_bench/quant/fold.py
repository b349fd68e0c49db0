"""Batch normalisation folded into the Linear layer after it (CrossQ's actor: BatchRenorm before each Linear and
before its heads). In evaluation a batch-norm layer is the affine map ``a * x + c`` of its running statistics, so
``W (a * x + c) + b = (W diag(a)) x + (W c + b)``: the network computes the same actions with no normalisation
layer left, and PTQ, the fake-quant claims and the C artifacts all quantize the folded weights."""

from __future__ import annotations

import torch
from torch import nn

from quarl_bench.errors import QuarlError


def is_batch_norm(module: nn.Module) -> bool:
    """torch's BatchNorm1d or sb3-contrib's BatchRenorm (its running statistics are ``ra_mean`` / ``ra_var``)."""
    return isinstance(module, nn.BatchNorm1d) or hasattr(module, "ra_mean")


def affine_of(norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, c) with ``norm(x) = a * x + c`` in evaluation mode."""
    mean, var, eps, weight, bias = _statistics(norm)
    a = 1.0 / torch.sqrt(var + eps)
    if weight is not None:
        a = weight * a
    c = -mean * a + (bias if bias is not None else 0.0)
    return a.detach(), c.detach()


def _statistics(norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor, float, torch.Tensor | None, torch.Tensor | None]:
    """Running mean and variance, epsilon, and the affine scale and shift (None without them)."""
    from sb3_contrib.common.torch_layers import BatchRenorm

    if isinstance(norm, nn.BatchNorm1d):
        assert norm.running_mean is not None and norm.running_var is not None  # tracked: SB3 builds it so
        return norm.running_mean, norm.running_var, norm.eps, norm.weight, norm.bias
    assert isinstance(norm, BatchRenorm)  # is_batch_norm: one or the other
    mean, var = (norm.get_buffer(name) for name in ("ra_mean", "ra_var"))
    return mean, var, norm.eps, *((norm.scale, norm.bias) if norm.affine else (None, None))


def fold_into(linear: nn.Linear, a: torch.Tensor, c: torch.Tensor) -> nn.Linear:
    """A new Linear computing ``linear(a * x + c)``."""
    folded = nn.Linear(linear.in_features, linear.out_features, bias=True)
    with torch.no_grad():
        folded.weight.copy_(linear.weight * a[None, :])
        bias = linear.bias if linear.bias is not None else torch.zeros(linear.out_features)
        folded.bias.copy_(bias + linear.weight @ c)
    return folded


def folded_chain(modules: list[nn.Module], heads: list[nn.Linear]) -> tuple[list[nn.Module], list[nn.Linear]]:
    """``modules`` (then ``heads``, the Linears that all read the chain's output) with every batch-norm layer folded
    into the Linear after it.

    :raises QuarlError: for a batch-norm layer followed by something other than a Linear layer.
    """
    chain: list[nn.Module] = []
    pending: tuple[torch.Tensor, torch.Tensor] | None = None
    for module in modules:
        if is_batch_norm(module):
            if pending is not None:
                raise QuarlError("two batch-norm layers in a row: expected each before a Linear layer")
            pending = affine_of(module)
        elif isinstance(module, nn.Linear) and pending is not None:
            chain.append(fold_into(module, *pending))
            pending = None
        elif pending is not None:
            raise QuarlError(
                f"a batch-norm layer before a {type(module).__name__}: expected it before a Linear layer to fold into"
            )
        else:
            chain.append(module)
    heads = [fold_into(head, *pending) for head in heads] if pending is not None else list(heads)
    return chain, heads


def fold_actor_batch_norms(policy: nn.Module) -> bool:
    """Fold the batch-norm layers of an SB3 actor (``actor.latent_pi`` into its next Linear, the last one into
    ``mu`` and ``log_std``) in place; returns whether there were any."""
    actor = getattr(policy, "actor", None)
    latent = getattr(actor, "latent_pi", None)
    if actor is None or not isinstance(latent, nn.Sequential) or not any(is_batch_norm(m) for m in latent):
        return False
    names = [name for name in ("mu", "log_std") if isinstance(getattr(actor, name, None), nn.Linear)]
    chain, heads = folded_chain(list(latent), [getattr(actor, name) for name in names])
    actor.latent_pi = nn.Sequential(*chain)
    for name, head in zip(names, heads, strict=True):
        setattr(actor, name, head)
    return True
