"""Pure helpers over an ActorQ run's records, shared by the CLI, the benchmark and the report."""

from __future__ import annotations

import warnings
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


def learned(curve: list[dict[str, Any]], alpha: float = 0.05) -> bool:
    """Whether a run's learner got better than its first evaluation by more than the episodes' spread: a one-sided
    Welch t-test of each later evaluation's episodes against the first's, at ``alpha`` over their number
    (Bonferroni: the best of many noisy evaluations beats the first by chance). A curve without its evaluations'
    episodes (rows stored before they were) counts as learned when its best is above its first."""
    from scipy.stats import ttest_ind

    first, later = curve[0], curve[1:]
    if not later:
        return False
    if "episodes" not in first:
        return max(point["reward"] for point in later) > first["reward"]
    for point in later:
        if point["reward"] <= first["reward"]:
            continue
        if len(set(point["episodes"])) == len(set(first["episodes"])) == 1:  # no spread: the better mean decides
            return True
        with warnings.catch_warnings():  # nearly equal episodes: scipy's precision warning, not the user's
            warnings.simplefilter("ignore", RuntimeWarning)
            test = ttest_ind(point["episodes"], first["episodes"], equal_var=False, alternative="greater")
        if test.pvalue < alpha / len(later):
            return True
    return False


def reward_target(curve: list[dict[str, float]], fraction: float = 0.95) -> float:
    """``fraction`` of the way from a run's first evaluation to its best one: 95% of the best reward when rewards
    start near 0 (CartPole: 9 -> 258 gives 245), and still meaningful for negative rewards (Pendulum: -1322 -> -110
    gives -171, where 0.95 x best would ask for better than the best)."""
    first, best = curve[0]["reward"], max(point["reward"] for point in curve)
    return first + fraction * (best - first)


def learner_bound(learner: dict[str, Any], samples_per_insert: float) -> str | None:
    """Why faster actors cannot shorten a run whose learner could not keep up with them (its replay ratio under half
    the bound it was allowed), else None."""
    ratio = learner.get("samples_per_insert")
    if ratio is None or ratio >= samples_per_insert / 2:
        return None
    return (
        f"learner-bound: it replayed each sample {ratio:.2f} times of the {samples_per_insert:g} allowed "
        f"({learner.get('updates', 0)} updates), so faster actors cannot shorten its time to reward"
    )
