"""What one episode's return can be, per env, derived from the env's definition (Gymnasium 1.x source): the
episode limit times the per-step reward range, plus terminal bonuses. A finite-sample certification rescales paired
differences by these bounds, so a bound must hold for every episode, not only the ones seen; an env whose definition
gives none is left out (certify then runs the asymptotic sequence, labelled so, unless ``--return-bounds`` says).

The bounds assume the env's default episode limit (``TimeLimit``) and actions inside the action space (SB3's
``predict`` clips continuous actions to it, and so does every quarl-bench policy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from quarl_bench.errors import QuarlError


@dataclass(frozen=True)
class ReturnBounds:
    """[low, high] for one episode's undiscounted return, and where the bound comes from."""

    low: float
    high: float
    source: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise QuarlError(
                f"bad return bounds {self.low:g} {self.high:g}: expected two finite numbers LO < HI (LO HI)"
            )


_PENDULUM_STEP = math.pi**2 + 0.1 * 8**2 + 0.001 * 2**2  # θ in [-π, π], θ' clipped to ±8, torque clipped to ±2

RETURN_BOUNDS: dict[str, ReturnBounds] = {
    "CartPole-v1": ReturnBounds(0, 500, "+1 per step, at most 500 steps"),
    "CartPole-v0": ReturnBounds(0, 200, "+1 per step, at most 200 steps"),
    "Acrobot-v1": ReturnBounds(-500, 0, "-1 per step (0 on the step that reaches the goal), at most 500 steps"),
    "MountainCar-v0": ReturnBounds(-200, 0, "-1 per step, at most 200 steps"),
    "MountainCarContinuous-v0": ReturnBounds(
        -99.9, 100, "-0.1 a² per step with |a| ≤ 1, at most 999 steps; +100 once, on reaching the goal"
    ),
    "Pendulum-v1": ReturnBounds(
        -200 * _PENDULUM_STEP,
        0,
        "-(θ² + 0.1 θ'² + 0.001 u²) per step, at most π² + 6.4 + 0.004 = 16.27, at most 200 steps",
    ),
}
# rl-zoo3's partially observable variants (velocities hidden from the observation): the same rewards and limits
RETURN_BOUNDS |= {
    "CartPoleNoVel-v1": ReturnBounds(0, 500, "CartPole-v1's: +1 per step, at most 500 steps"),
    "PendulumNoVel-v1": replace(
        RETURN_BOUNDS["Pendulum-v1"], source="Pendulum-v1's: " + RETURN_BOUNDS["Pendulum-v1"].source
    ),
}

# Envs of the zoo whose definition bounds no return, and why (docs/statistics.md lists them).
UNBOUNDED = {
    "LunarLander-v3": "the shaping reward follows position, speed and angle, none of which the env bounds",
    "LunarLanderContinuous-v3": "the shaping reward follows position, speed and angle, none of which the env bounds",
    "BipedalWalker-v3": "the torque cost has no bound the env enforces per step besides action clipping, and the "
    "hull-angle term is unbounded",
}


def return_bounds(env_id: str, declared: tuple[float, float] | None = None) -> ReturnBounds | None:
    """The bounds a certification uses: ``declared`` (the user's ``--return-bounds``) where given, else the
    table's line for ``env_id``, else None (no bound known)."""
    if declared is not None:
        return ReturnBounds(float(declared[0]), float(declared[1]), "declared (--return-bounds)")
    return RETURN_BOUNDS.get(env_id)


def check_returns(bounds: ReturnBounds | None, returns: Any, identities: Any, what: str) -> None:
    """Stop with one line when an episode's return lies outside ``bounds`` (those a finite-sample guarantee rests
    on; None: nothing to check). ``what`` names the policy that played.

    :raises QuarlError: naming the episode (env, episode, reset seed), its return and the bounds.
    """
    if bounds is None:
        return
    for value, identity in zip(returns, identities, strict=False):
        if not bounds.low <= value <= bounds.high:
            raise QuarlError(
                f"episode {list(identity)} (env, episode, reset seed) of {what} returned {value:g}, outside the "
                f"return bounds [{bounds.low:g}, {bounds.high:g}] ({bounds.source}): no verdict stored; pass "
                "--return-bounds LO HI that hold for every episode, or --guarantee asymptotic"
            )
