"""Standard mixed precision for an SB3 algorithm's own training loop (QuaRL §5): autocast around the networks'
forward passes only; fp32 master weights, loss, backward and optimizer step; dynamic loss scaling for fp16.

SB3 calls ``loss.backward()``, clips and steps itself, so ``torch.amp.GradScaler`` (which needs the loop to call
``scaler.scale(loss)``) cannot be dropped in. The scaling it does is reproduced with hooks instead: each wrapped
network's output multiplies its gradient by the scale on the way back (what scaling the loss does to every
gradient below it), each parameter's gradient is divided by it as it arrives (so SB3's clipping sees true values),
and an optimizer whose gradients hold inf/NaN skips its step and halves the scale, as GradScaler does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class LossScale:
    """Dynamic loss scale with GradScaler's defaults: start at 2**16, halve on overflow, double after 2000 steps."""

    value: float = 2.0**16
    growth_interval: int = 2000
    good_steps: int = 0
    skipped_steps: int = 0

    def update(self, found_inf: bool) -> None:
        if found_inf:
            self.value, self.good_steps, self.skipped_steps = self.value / 2, 0, self.skipped_steps + 1
            return
        self.good_steps += 1
        if self.good_steps % self.growth_interval == 0:
            self.value *= 2


class _ScaleGradient(torch.autograd.Function):
    """Identity forward; the gradient times ``scale`` backward."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.scale, None


def networks(policy: nn.Module) -> list[nn.Module]:
    """The policy's direct sub-networks that hold parameters (q_net, actor, critic, mlp_extractor, ...), each once,
    leaving out any that sits inside another (its gradient would be scaled twice)."""
    candidates = list({id(m): m for m in policy.children() if any(True for _ in m.parameters())}.values())
    nested = {id(inner) for outer in candidates for inner in outer.modules() if inner is not outer}
    return [m for m in candidates if id(m) not in nested]


def _to_fp32(output: Any, scale: LossScale | None) -> Any:
    if isinstance(output, torch.Tensor):
        if not output.is_floating_point():
            return output
        output = output.float()
        return _ScaleGradient.apply(output, scale.value) if scale is not None and output.requires_grad else output
    if isinstance(output, tuple | list):
        return type(output)(_to_fp32(item, scale) for item in output)
    return output


def enable_mixed_precision(model: Any, dtype: str) -> LossScale | None:
    """Run ``model``'s network forwards under autocast (on the model's own device) from now on; returns the loss
    scale for fp16 (None for bf16, whose range needs none)."""
    device, autocast_dtype = model.device.type, AUTOCAST_DTYPES[dtype]
    scale = LossScale() if dtype == "fp16" else None
    wrapped = networks(model.policy)
    for module in wrapped:
        original = module.forward

        def forward(*args: Any, _original=original, **kwargs: Any) -> Any:
            with torch.autocast(device, dtype=autocast_dtype):
                output = _original(*args, **kwargs)
            return _to_fp32(output, scale)  # losses and targets are computed in fp32 outside

        module.forward = forward
    if scale is not None:
        for module in wrapped:
            for parameter in module.parameters():
                parameter.register_hook(lambda grad: grad / scale.value)
        for optimizer in optimizers(model.policy):
            skip_non_finite_steps(optimizer, scale)
    return scale


def optimizers(policy: nn.Module) -> list[torch.optim.Optimizer]:
    found = [
        getattr(owner, "optimizer", None)
        for owner in (policy, getattr(policy, "actor", None), getattr(policy, "critic", None))
    ]
    return list({id(o): o for o in found if isinstance(o, torch.optim.Optimizer)}.values())


def skip_non_finite_steps(optimizer: torch.optim.Optimizer, scale: LossScale) -> None:
    """An overflowed step (inf/NaN in this optimizer's gradients) is skipped and the scale halved, as GradScaler."""
    original = optimizer.step

    def step(*args: Any, **kwargs: Any) -> Any:
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        found_inf = any(not torch.isfinite(g).all() for g in grads)
        scale.update(found_inf)
        if found_inf:
            optimizer.zero_grad()
            return None
        return original(*args, **kwargs)

    optimizer.step = step  # type: ignore[method-assign]  # this optimizer's steps only: the scaler's skip
