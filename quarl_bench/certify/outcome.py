"""What a certification compares on each paired episode: the return, or an outcome people who ship policies decide
on (:mod:`quarl_bench.evaluation.outcomes` records them as the episodes are played).

Every outcome is read "higher is better": a success is 1, a failure 0; a cost enters negated. So one question serves
them all, the paired mean difference ``mean(quantized - fp32) >= -ε`` on a known range, which the finite-sample
betting sequence decides at every look (docs/statistics.md): for a success rate, a difference lies in {-1, 0, 1},
and only discordant pairs move the capital.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.return_bounds import ReturnBounds

CERTIFIED_OUTCOMES = ("return", "success", "progress", "cost", "steps")  # what certify --outcome takes
SUCCESS_RULES = ("info", "terminated", "truncated", "return>=X", "FILE.py:FN")
THRESHOLD = re.compile(r"^return>=(-?\d+(?:\.\d+)?)$")
# what the env must report (steps: the time to success, from is_success at every step)
INFO_KEYS = {"success": "is_success", "progress": "progress", "cost": "cost", "steps": "is_success"}
LOWER_IS_BETTER = ("cost", "steps")  # read negated, so one question serves every outcome


def check_outcome(
    outcome: str, success: str, tolerance_abs: float | None, bounds: tuple | None, progress: str = "info"
) -> None:
    """:raises QuarlError: in one line, for an outcome, success or progress rule or ε that does not fit (a
    function rule is imported to see that it is there)."""
    from quarl_bench.evaluation.judges import is_function_rule, load_judge

    if outcome not in CERTIFIED_OUTCOMES:
        raise QuarlError(f"bad outcome {outcome!r}: expected one of {', '.join(CERTIFIED_OUTCOMES)}")
    if is_function_rule(success):
        load_judge(success, "--success")
    elif success not in SUCCESS_RULES[:3] and not THRESHOLD.match(success):
        raise QuarlError(
            f"bad success rule {success!r}: expected one of {', '.join(SUCCESS_RULES)} (X a number, FN a function "
            "of the episode)"
        )
    if is_function_rule(progress):
        load_judge(progress, "--progress")
    elif progress != "info":
        raise QuarlError(f"bad progress rule {progress!r}: expected info or FILE.py:FN (a function of the episode)")
    if outcome == "return":
        return
    if tolerance_abs is None:
        raise QuarlError(
            f"--outcome {outcome} needs --tolerance-abs EPS: how far the quantized policy's {outcome} may fall "
            f"{'above' if outcome in LOWER_IS_BETTER else 'below'} fp32's"
        )
    if outcome in ("success", "progress") and not 0 < tolerance_abs < 1:
        raise QuarlError(f"bad ε {tolerance_abs:g} for --outcome {outcome}: expected a share in (0, 1), e.g. 0.05")
    if outcome == "cost" and bounds is None:
        raise QuarlError("--outcome cost needs --return-bounds LO HI: the range every episode's summed cost lies in")


def outcome_rule(outcome: str, success: str, progress: str) -> str:
    """The rule that decides ``outcome``: its success or progress rule ('' for the return and the cost)."""
    return {"success": success, "progress": progress}.get(outcome, "")


def success_rule(success: str) -> str:
    """The rule in words, for verdicts and reports."""
    return {"info": "info['is_success']", "terminated": "ended on its own", "truncated": "ran to its time limit"}.get(
        success, success
    )


def outcome_bounds(outcome: str, declared: tuple[float, float] | None, env_id: str = "") -> ReturnBounds | None:
    """The range of an outcome's per-episode value, higher is better (None for the return: the env's bounds).

    :raises QuarlError: for steps to success on an env with no time limit and no ``--return-bounds``.
    """
    if outcome in ("success", "progress"):
        return ReturnBounds(0.0, 1.0, f"a {outcome} lies in [0, 1]")
    if outcome == "steps":
        if declared is not None:
            return ReturnBounds(-declared[1], -declared[0], "--return-bounds: the steps' range, negated")
        limit = _time_limit(env_id)
        if limit is None:
            raise QuarlError(
                f"--outcome steps on {env_id}: it has no time limit to bound the steps to success; pass "
                "--return-bounds LO HI"
            )
        return ReturnBounds(-float(limit), 0.0, f"steps to success lie in [0, {limit}] (its time limit), negated")
    if outcome == "cost":
        assert declared is not None  # check_outcome asks for it
        return ReturnBounds(-declared[1], -declared[0], "--return-bounds: the cost's range, negated")
    return None


def outcome_values(row: dict[str, Any], outcome: str, success: str) -> np.ndarray:
    """Each episode's value of ``outcome`` in ``row`` (in the row's episode order), higher is better.

    :raises QuarlError: for a row whose env did not report the outcome (or stored before outcomes were).
    """
    rewards = np.asarray(row["episode_rewards"], dtype=float)
    if outcome == "return":
        return rewards
    stored = row.get("episode_outcomes") or {}  # rows stored before outcomes were recorded have none
    if outcome == "success" and (threshold := THRESHOLD.match(success)):
        return (rewards >= float(threshold.group(1))).astype(float)
    name = "terminated" if outcome == "success" and success in ("terminated", "truncated") else outcome
    name = "steps_to_success" if outcome == "steps" else name
    if name not in stored:
        raise QuarlError(
            f"{row.get('env_id', 'this env')} reported no {INFO_KEYS.get(name, name)!r} in its info "
            f"(row {row.get('key', '?')}): expected an env that does, "
            + ("or --success terminated, truncated or return>=X" if outcome == "success" else "or another --outcome")
        )
    values = np.asarray(stored[name], dtype=float)
    if outcome == "success" and success == "truncated":
        return 1.0 - values
    return -values if outcome in LOWER_IS_BETTER else values


def _time_limit(env_id: str) -> int | None:
    import gymnasium as gym

    try:
        limit = gym.spec(env_id).max_episode_steps
    except gym.error.Error:
        return None
    return int(limit) if limit else None


def probe_reports(env_id: str, env_kwargs: dict[str, Any], outcome: str, rule: str) -> None:
    """Before anything is played: one step of the env, to see it reports what the outcome reads (``rule``: the
    outcome's success or progress rule; a function judges without the env).

    :raises QuarlError: naming the info key the env does not report.
    """
    key = INFO_KEYS.get(outcome)
    if key is None or (outcome in ("success", "progress") and rule != "info"):
        return
    import gymnasium as gym

    from quarl_bench.zoo.quiet import native_output_silenced

    with native_output_silenced():  # pybullet prints "argv[0]=" from C as an env starts
        env = gym.make(env_id, **env_kwargs)
        try:
            env.reset(seed=0)
            _, _, _, _, info = env.step(env.action_space.sample())
        finally:
            env.close()
    if key not in info:
        hint = "or --success terminated, truncated or return>=X" if outcome == "success" else "or another --outcome"
        raise QuarlError(f"{env_id} reports no {key!r} in its info: --outcome {outcome} needs an env that does, {hint}")


def arm_outcomes(outcome: str, quantized: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """Each policy's own mean of the certified outcome over the pairs played (a success rate: the successes too),
    and a warning where the reference's rate leaves nothing to compare (it almost never, or always, succeeds)."""
    found: dict[str, Any] = {"quantized_mean": float(quantized.mean()), "reference_mean": float(reference.mean())}
    if outcome != "success":
        return found
    found |= {
        "quantized_successes": int(quantized.sum()),
        "reference_successes": int(reference.sum()),
        "outcome_pairs": len(reference),
    }
    rate = float(reference.mean())
    if len(reference) < NOTED_AFTER:
        return found
    if rate < RARE_SUCCESS:
        found["warning"] = (
            f"the reference succeeds in {int(reference.sum())} of {len(reference)} pairs: a safe verdict says "
            "little where the reference itself almost never succeeds (check the success rule)"
        )
    elif rate == 1.0 and quantized.mean() == 1.0:
        found["warning"] = (
            f"both policies succeed in all {len(reference)} pairs (a success rule that cannot fail would read the same)"
        )
    return found


RARE_SUCCESS = 0.1  # a reference success rate below this is called out
NOTED_AFTER = 20  # pairs before a rate is called out (a first batch's)
