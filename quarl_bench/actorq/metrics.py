"""Pure helpers over an ActorQ run's records, shared by the CLI, the benchmark and the report."""

from __future__ import annotations

from typing import Any

PHASES = ("step", "pull", "quantize", "deserialize", "load_state_dict", "push")


def breakdown(actors: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per phase summed over actors."""
    return {phase: float(sum(a["seconds"].get(phase, 0.0) for a in actors)) for phase in PHASES}


def time_to_reward(curve: list[dict[str, float]], reward: float | None) -> float | None:
    """Seconds until the evaluated reward first reaches ``reward`` (None if never, or no target)."""
    if reward is None:
        return None
    return next((p["seconds"] for p in curve if p["reward"] >= reward), None)


def reward_target(curve: list[dict[str, float]], fraction: float = 0.95) -> float:
    """``fraction`` of the way from a run's first evaluation to its best one: 95% of the best reward when rewards
    start near 0 (CartPole: 9 -> 258 gives 245), and still meaningful for negative rewards (Pendulum: -1322 -> -110
    gives -171, where 0.95 x best would ask for better than the best)."""
    first, best = curve[0]["reward"], max(point["reward"] for point in curve)
    return first + fraction * (best - first)
