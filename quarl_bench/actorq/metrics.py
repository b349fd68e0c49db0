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
