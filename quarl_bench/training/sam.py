"""Sharpness-aware minimisation (Foret et al. 2021, "Sharpness-Aware Minimization for Efficiently Improving
Generalization"), written out: no well-kept package on the index has it.

One SAM update of weights ``w`` with gradient ``g = ∇L(w)``:

1. ascend to the worst nearby point ``w + e``, ``e = rho * g / ||g||`` (the L2 norm over every parameter);
2. take the gradient there, ``∇L(w + e)``, go back to ``w`` and let the base optimizer step with it.

:class:`SAM` is that update as a torch optimizer (``step(closure)``, or ``first_step``/``second_step``). SB3's
algorithms call ``optimizer.step()`` once per minibatch with no closure, so :class:`AlternatingSAM` makes the two
steps of one update two consecutive minibatches: the ascent uses one minibatch's gradient, the descent the next
one's at the perturbed weights (SAM's m-sharpness, over consecutive minibatches). Between SB3's ``train`` calls the
weights are put back to ``w`` (:meth:`AlternatingSAM.hold`), so rollouts and target-network updates see the
weights, never the perturbation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import overload

import torch

from quarl_bench.errors import QuarlError


class SAM(torch.optim.Optimizer):
    """SAM around a base optimizer (its parameter groups are shared with it).

    :param base: the optimizer that takes the descent step (Adam, SGD, RMSprop, ...).
    :param rho: the radius of the ascent step, in parameter units (Foret et al. use 0.05).
    """

    def __init__(self, base: torch.optim.Optimizer, rho: float = 0.05) -> None:
        if not rho > 0:
            raise QuarlError(f"bad SAM rho {rho:g}: expected a radius > 0, e.g. 0.05")
        self.base = base
        self.rho = rho
        self.perturbation: dict[torch.Tensor, torch.Tensor] = {}  # parameter -> its ascent e, while ascended
        super().__init__(base.param_groups, {"rho": rho})
        self.param_groups = base.param_groups
        self.state = base.state

    def _parameters(self) -> Iterator[torch.Tensor]:
        for group in self.param_groups:
            yield from (p for p in group["params"] if p.grad is not None)

    @torch.no_grad()
    def first_step(self) -> bool:
        """Move to ``w + rho * g / ||g||`` (remembering ``e``); False when the gradient is zero (nothing to do)."""
        grads = [(p, p.grad) for p in self._parameters() if p.grad is not None]
        norm = torch.norm(torch.stack([g.detach().norm(2) for _, g in grads])) if grads else torch.tensor(0.0)
        if not norm > 0:
            return False
        scale = self.rho / norm
        for p, grad in grads:
            e = grad * scale
            p.add_(e)
            self.perturbation[p] = e
        return True

    @torch.no_grad()
    def restore(self) -> None:
        """Back to ``w`` (the ascent undone), keeping the gradient taken at ``w + e``."""
        for p, e in self.perturbation.items():
            p.sub_(e)
        self.perturbation.clear()

    def second_step(self) -> None:
        """Back to ``w``, then the base optimizer's step with the gradient taken at ``w + e``."""
        self.restore()
        self.base.step()

    @property
    def perturbed(self) -> bool:
        return bool(self.perturbation)

    @overload
    def step(self, closure: None = None) -> None: ...

    @overload
    def step(self, closure: Callable[[], float]) -> float: ...

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One SAM update: ``closure`` (zero the gradients, compute the loss, backward) is called at ``w`` and again
        at ``w + e``; returns the loss at ``w``."""
        if closure is None:
            raise QuarlError("SAM.step needs a closure that recomputes the loss (or use first_step/second_step)")
        loss = closure()
        if self.first_step():
            with torch.enable_grad():
                closure()
            self.second_step()
        else:
            self.base.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.base.zero_grad(set_to_none)


class AlternatingSAM(SAM):
    """SAM for a training loop that calls ``step()`` without a closure (SB3): odd calls ascend, even calls descend
    (see the module docstring). ``updates`` counts the descents."""

    def __init__(self, base: torch.optim.Optimizer, rho: float = 0.05) -> None:
        super().__init__(base, rho)
        self.updates = 0
        self.held: dict[torch.Tensor, torch.Tensor] = {}

    def step(self, closure: None = None) -> None:  # type: ignore[override]  # SB3 calls step() bare: odd ascend, even descend
        if self.perturbed:
            self.second_step()
            self.updates += 1
        elif not self.first_step():
            self.base.step()

    @torch.no_grad()
    def hold(self) -> None:
        """Take a pending ascent off the weights (rollouts and target updates then see ``w``), keeping it."""
        for p, e in self.perturbation.items():
            p.sub_(e)
        self.held, self.perturbation = self.perturbation, {}

    @torch.no_grad()
    def resume(self) -> None:
        """Put a held ascent back on: the next ``step`` descends from it."""
        for p, e in self.held.items():
            p.add_(e)
        self.perturbation, self.held = self.held, {}

    def state_dict(self) -> dict:
        return self.base.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.base.load_state_dict(state_dict)
