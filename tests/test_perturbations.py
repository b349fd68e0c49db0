"""Conditions (``--perturb``): each paired episode draws its perturbation from its own generator, so fp32 and the
quantized policy meet the same noise and dynamics on the same episode whatever happened before; the condition is
part of every row's and verdict's identity, and a perturbed row or verdict never joins a nominal table or line."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.perturbations import PerturbedEnv, condition_for, condition_grid, parse_perturbation
from quarl_bench.store import ResultStore, Variant


def test_a_condition_has_one_spelling_and_bad_ones_are_named() -> None:
    assert parse_perturbation(" sticky=0.1, masspole=0.2,action-delay=0").text == "masspole=0.2,sticky=0.1"
    assert condition_for("", "CartPole-v1") == ""
    for text, message in (
        ("obs-noise", "bad perturbation 'obs-noise': expected NAME=SEVERITY"),
        ("sticky=1.5", "bad severity 1.5 for sticky: expected a severity in [0, 1]"),
        ("action-delay=1.5", "bad severity 1.5 for action-delay: expected an integer in [0, 50]"),
        ("masspole=0.95", "bad severity 0.95 for masspole"),
    ):
        with pytest.raises(QuarlError, match=re.escape(message)):
            parse_perturbation(text)
    with pytest.raises(
        QuarlError, match=r"bad perturbation 'g' for CartPole-v1: .*it accepts .*masspole, length, force_mag$"
    ):
        condition_for("g=0.1", "CartPole-v1")
    assert condition_for("g=0.1", "Pendulum-v1") == "g=0.1"


def test_a_severity_grid_spells_one_condition_per_combination() -> None:
    assert condition_grid("") == [""]
    assert condition_grid("obs-noise=0.05/0.1") == ["obs-noise=0.05", "obs-noise=0.1"]
    assert condition_grid("sticky=0.1,masspole=0.2/0.4") == ["sticky=0.1,masspole=0.2", "sticky=0.1,masspole=0.4"]
    # a name from zoo_configs/perturbations.yaml stands for its condition
    assert condition_grid("sensor-noise") == ["obs-noise=0.05", "obs-noise=0.1", "obs-noise=0.2"]
    assert condition_for("robot-light", "CartPole-v1") == "action-noise=0.05,obs-noise=0.05,sticky=0.05"
    with pytest.raises(QuarlError, match="a severity grid .* is certify's"):
        condition_for("sensor-noise", "CartPole-v1")
    with pytest.raises(QuarlError, match=r"bad perturbation 'wind': expected .* a named condition \(sensor-noise"):
        condition_grid("wind")


def episode_masses(policy, episodes: int = 12) -> dict[tuple[int, int], float]:
    """(env, episode) -> the pole mass that episode played with, under masspole=0.5."""
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    env = PerturbedEnv(venv, parse_perturbation("masspole=0.5"), seed=3, obs_scale=None)
    observations = env.reset()
    seen = {(i, 0): env.bases[i].masspole for i in range(2)}
    steps = 0
    while min(env.episode) < episodes:
        observations, _, dones, _ = env.step(np.array([policy(o, steps) for o in observations]))
        steps += 1
        for i in np.flatnonzero(dones):
            seen[(int(i), int(env.episode[i]))] = env.bases[i].masspole
    env.close()
    return seen


def test_each_episode_draws_its_dynamics_from_its_own_seed_whatever_came_before() -> None:
    falls_fast = episode_masses(lambda observation, step: 0)  # always left: short episodes
    balances = episode_masses(lambda observation, step: int(observation[2] > 0))  # longer, other lengths
    shared = falls_fast.keys() & balances.keys()
    assert len(shared) >= 20
    assert all(falls_fast[k] == balances[k] for k in shared)  # the same paired episode, the same pole
    masses = np.array([falls_fast[k] for k in shared])
    assert masses.min() >= 0.05 and masses.max() <= 0.15 and len(set(masses)) == len(masses)  # 0.1 x U[0.5, 1.5]


def episode_severities(policy, text: str, episodes: int = 12) -> dict[tuple[int, int], dict[str, float]]:
    """(env, episode) -> the severities that episode played under."""
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    env = PerturbedEnv(venv, parse_perturbation(text), seed=5, obs_scale=None)
    observations = env.reset()
    seen = {(i, 0): dict(env.current[i]) for i in range(2)}
    steps = 0
    while min(env.episode) < episodes:
        observations, _, dones, _ = env.step(np.array([policy(o, steps) for o in observations]))
        steps += 1
        for i in np.flatnonzero(dones):
            seen[(int(i), int(env.episode[i]))] = dict(env.current[i])
    env.close()
    return seen


def test_a_mixture_draws_each_episode_s_severity_from_its_list_alike_for_both_policies() -> None:
    condition = parse_perturbation("action-noise~0.05/0.3,masspole=0.2")
    assert condition.text == "action-noise~0.05/0.3,masspole=0.2"
    assert condition_grid("action-noise~0.05/0.3,masspole=0.2/0.4") == [
        "action-noise~0.05/0.3,masspole=0.2",
        "action-noise~0.05/0.3,masspole=0.4",
    ]  # a mixture is one condition; a grid's severities are several
    falls = episode_severities(lambda observation, step: 0, "action-noise~0.05/0.3,masspole=0.2")
    balances = episode_severities(
        lambda observation, step: int(observation[2] > 0), "action-noise~0.05/0.3,masspole=0.2"
    )
    shared = falls.keys() & balances.keys()
    assert all(falls[k] == balances[k] for k in shared)
    drawn = [falls[k]["action-noise"] for k in shared]
    assert set(drawn) == {0.05, 0.3} and all(falls[k]["masspole"] == 0.2 for k in shared)
    for text, message in (
        ("init-spread~1/2", "init-spread is set once"),
        ("sticky~0.1/2", "bad severity 2 for sticky"),
        ("sticky~0.1/0.2,sticky=0.1", "given both fixed (=) and mixed (~)"),
    ):
        with pytest.raises(QuarlError, match=re.escape(message)):
            parse_perturbation(text)


def test_a_mujoco_model_s_arrays_are_scaled_as_a_whole_per_episode() -> None:
    pytest.importorskip("mujoco")
    assert condition_for("body_mass=0.3,friction=0.2", "Hopper-v4") == "body_mass=0.3,friction=0.2"
    with pytest.raises(
        QuarlError, match=r"it accepts [^:]*masspole, length, force_mag$"
    ):  # CartPole's are named, no MuJoCo one
        condition_for("body_mass=0.3", "CartPole-v1")
    venv = DummyVecEnv([lambda: gym.make("Hopper-v4") for _ in range(2)])
    env = PerturbedEnv(venv, parse_perturbation("body_mass=0.3"), seed=0, obs_scale=None)
    env.reset()
    nominal = env.nominal[0]["body_mass"]
    factors = [env.bases[i].model.body_mass[1:] / nominal[1:] for i in range(2)]
    for factor in factors:  # one factor for every body of an episode, within [0.7, 1.3]
        assert np.allclose(factor, factor[0]) and 0.7 <= factor[0] <= 1.3
    assert not np.isclose(factors[0][0], factors[1][0])  # each env's episode draws its own
    env.close()


@pytest.mark.parametrize(
    ("env_id", "dimension", "half_width"),
    [("CartPole-v1", 0, 0.05), ("Acrobot-v1", 1, 0.1), ("MountainCar-v0", 0, 0.1), ("Pendulum-v1", 2, 1.0)],
)
def test_wider_initial_states_draw_from_a_range_1_plus_s_times_as_wide_alike_for_both_policies(
    env_id: str, dimension: int, half_width: float
) -> None:
    def starts(spread: float) -> np.ndarray:
        venv = DummyVecEnv([lambda: gym.make(env_id) for _ in range(40)])
        venv.seed(7)
        env = PerturbedEnv(venv, parse_perturbation(f"init-spread={spread}" if spread else ""), 7, None)
        first = env.reset()[:, dimension]
        env.close()
        return first

    nominal, wider = starts(0), starts(3)
    centre = -0.5 if env_id.startswith("MountainCar") else 0.0
    assert np.abs(nominal - centre).max() <= half_width  # Acrobot's start shows as sin(θ1), within ±0.1 too
    assert np.abs(wider - centre).max() <= 4 * half_width and np.abs(wider - centre).max() > 1.5 * half_width
    assert np.array_equal(wider, starts(3))  # the env's own seeded draw: the same starts for fp32 and quantized
    with pytest.raises(QuarlError, match=r"bad perturbation 'init-spread' for LunarLander-v3: .*Pendulum"):
        condition_for("init-spread=1", "LunarLander-v3")


def test_a_delayed_env_receives_the_action_chosen_k_steps_before() -> None:
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    env = PerturbedEnv(venv, parse_perturbation("action-delay=2"), seed=0, obs_scale=None)
    env.reset()
    received = [int(env._acted(0, action)) for action in (1, 0, 0, 1, 1)]
    assert received == [1, 1, 1, 0, 0]  # the first action until the delay has passed, then the one 2 steps before
    env.close()


@pytest.mark.parametrize("delay", [1, 2])
def test_a_delayed_box_action_is_the_one_chosen_k_steps_before_not_the_first(delay: int) -> None:
    """Box actions travel as rows of the batch the env is sent: the delay keeps what the policy chose, not the row
    that step overwrote with what it played (which replayed the first action forever)."""
    venv = DummyVecEnv([lambda: gym.make("Pendulum-v1")])
    env = PerturbedEnv(venv, parse_perturbation(f"action-delay={delay}"), seed=0, obs_scale=None)
    env.reset()
    torques = [0.5, -1.0, 1.5, -2.0, 0.25]
    sent = []
    for torque in torques:
        env.step_async(np.array([[torque]], dtype=np.float32))
        sent.append(float(env.venv.actions[0][0]))  # what DummyVecEnv was handed
        env.step_wait()
    assert sent == [torques[0]] * delay + torques[: len(torques) - delay]
    env.close()


@pytest.mark.slow
def test_a_condition_reaches_run_certify_and_report_on_its_own_rows_and_line(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "q.sqlite"
    agent = ("--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--store", store)
    condition = ("--perturb", "masspole=0.5,action-noise=0.05")
    for flags in ((), condition):
        code, _, err = cli("run", *agent, "--bits", "8", "-n", "10", *flags)
        assert code == 0, err
    with ResultStore(store) as opened:
        rows = opened.to_dataframe()
        assert set(rows["perturbation"]) == {"", "action-noise=0.05,masspole=0.5"}
        assert rows["key"].nunique() == len(rows) == 4  # the condition is part of every key
        nominal = opened.select(Variant(episodes=10))
        assert set(nominal["perturbation"]) == {""} and len(nominal) == 2  # a table never mixes the two
    code, out, err = cli("certify", *agent, "--bits", "8", *condition)
    assert code == 0, err
    assert "under action-noise=0.05,masspole=0.5" in out and "int8: safe" in out
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    line = (tmp_path / "report" / "certified_verdicts.csv").read_text().splitlines()[1]
    assert '"action-noise=0.05,masspole=0.5"' in line
    robustness = pd.read_csv(tmp_path / "report" / "robustness.csv")
    ten = robustness[robustness["episodes"] == 10]  # run's rows: the nominal line first, then the condition's
    assert list(ten["condition"]) == ["nominal", "action-noise=0.05,masspole=0.5"]
    assert ten["int8"].str.match(r"^\d+\.\d\d \[").all()  # the mean with its interval, per condition
    curves = sorted(path.name for path in (tmp_path / "report").glob("robustness_*.svg"))
    assert curves == [f"robustness_{rows['agent_hash'].iloc[0][:8]}_action-noise_masspole.svg"]


@pytest.mark.slow
def test_a_severity_grid_certifies_each_condition_sharing_alpha(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "q.sqlite"
    agent = ("--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--store", store)
    code, out, err = cli("certify", *agent, "--bits", "8", "--perturb", "action-noise=0.05/0.3")
    assert code == 0, err
    assert "under action-noise=0.05 " in out and "under action-noise=0.3 " in out
    with ResultStore(store) as opened:
        verdicts = opened.verdicts()
    assert sorted(s["perturb"] for s in verdicts["settings"]) == ["action-noise=0.05", "action-noise=0.3"]
    assert [e["families"] for e in verdicts["evidence"]] == [2, 2]  # α split over the two conditions
    assert all(e["alpha_test"] <= 0.025 for e in verdicts["evidence"])
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, err
    [curve] = (tmp_path / "report").glob("robustness_*_action-noise.svg")  # int8 and fp32 against the severity
    assert "int8" in curve.read_text() and "fp32" in curve.read_text()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--perturb", "friction=0.2"), "bad perturbation 'friction' for CartPole-v1"),
        (("--perturb", "obs-noise=-1"), "bad severity -1 for obs-noise"),
    ],
)
def test_bad_conditions_are_one_line_exit_2_nothing_stored(cli, zoo: Path, tmp_path: Path, flags, message) -> None:
    store = tmp_path / "q.sqlite"
    for command in ("run", "certify"):
        code, _, err = cli(command, "--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, *flags, "--store", store)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not store.exists() or ResultStore(store).to_dataframe().empty
