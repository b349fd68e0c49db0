"""Goal-conditioned (Dict-observation) policies shipped: the keys concatenated in a recorded order, normalisation per
key folded in, ORT int8 and C int8 artifacts behind their gates; sensor noise on one key, in the env's units."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv

from quarl_bench.errors import QuarlError
from quarl_bench.observation_layout import ObservationLayout, layout_of
from quarl_bench.perturbations import parse_perturbation

GOAL_SPACE = spaces.Dict(
    {
        "observation": spaces.Box(-10, 10, (4,), np.float32),
        "achieved_goal": spaces.Box(-10, 10, (2,), np.float32),
        "desired_goal": spaces.Box(-10, 10, (2,), np.float32),
    }
)


def test_a_dict_observation_is_its_keys_concatenated_in_the_space_s_order() -> None:
    layout = layout_of(GOAL_SPACE)
    assert layout is not None and layout.names == ("achieved_goal", "desired_goal", "observation")  # sorted
    batch = {
        "observation": np.arange(8.0).reshape(2, 4),
        "achieved_goal": np.array([[10.0, 11.0], [12.0, 13.0]]),
        "desired_goal": np.array([[20.0, 21.0], [22.0, 23.0]]),
    }
    flat = layout.flatten(batch)
    assert flat.tolist() == [[10, 11, 20, 21, 0, 1, 2, 3], [12, 13, 22, 23, 4, 5, 6, 7]]
    assert {key: value.tolist() for key, value in layout.unflatten(flat).items()} == {
        key: value.tolist() for key, value in batch.items()
    }
    assert layout.as_json()[1] == {"name": "desired_goal", "shape": [2], "offset": 2, "size": 2}
    assert layout.features()[:3] == ["achieved_goal[0]", "achieved_goal[1]", "desired_goal[0]"]
    assert layout_of(spaces.Box(-1, 1, (3,))) is None
    image = spaces.Dict({"camera": spaces.Box(0, 255, (8, 8, 3), np.uint8)})
    with pytest.raises(QuarlError, match="key 'camera' is a Box of shape \\(8, 8, 3\\): expected every key a vector"):
        layout_of(image)


def test_partial_normalisation_of_the_keys_is_refused_in_one_line() -> None:
    class Normalizer:
        norm_obs_keys = ["observation"]

    layout = ObservationLayout((("desired_goal", (2,)), ("observation", (4,))))
    with pytest.raises(QuarlError, match="normalises observation but not desired_goal"):
        layout.flat_statistics(Normalizer())


def test_noise_on_one_part_of_the_observation_leaves_the_rest_alone() -> None:
    """``@i:j`` on a Box and ``@key`` on a Dict perturb that part only, from the episode's own generator."""
    from quarl_bench.evaluation.perturbations import PerturbedEnv

    def cartpole() -> DummyVecEnv:
        venv = DummyVecEnv([lambda: gym.make("CartPole-v1")])
        venv.seed(3)
        return venv

    clean = cartpole().reset()
    noisy = PerturbedEnv(cartpole(), parse_perturbation("obs-noise-raw@1:3=0.5"), 0, None).reset()
    moved = np.abs(noisy - clean)[0] > 1e-6
    assert moved.tolist() == [False, True, True, False]
    goal = {"observation": np.zeros((1, 4)), "achieved_goal": np.zeros((1, 2)), "desired_goal": np.zeros((1, 2))}
    env = PerturbedEnv(cartpole(), parse_perturbation("obs-noise-raw@desired_goal=0.01"), 0, None)
    env.reset()
    seen = env._observed(goal)
    assert np.all(seen["observation"] == 0) and np.all(seen["achieved_goal"] == 0)
    assert 0 < np.abs(seen["desired_goal"]).max() < 0.1
    with pytest.raises(QuarlError, match="action-noise touches the action"):
        parse_perturbation("action-noise@1=0.1")


def test_a_bad_target_names_the_keys_or_dimensions_the_env_has() -> None:
    from quarl_bench.evaluation.perturbations import condition_for

    with pytest.raises(QuarlError, match="the observation has 4 dimensions, expected i or i:j"):
        condition_for("obs-noise@3:9=0.1", "CartPole-v1")
    with pytest.raises(QuarlError, match="has no key 'goal'; expected @KEY or dimensions"):
        condition_for("obs-noise@goal=0.1", "CartPole-v1")
    assert condition_for("obs-noise@0:2=0.1", "CartPole-v1") == "obs-noise@0:2=0.1"


@pytest.mark.slow
def test_a_goal_conditioned_arm_exports_to_ort_int8_and_c_int8_behind_their_gates(cli, tmp_path: Path) -> None:
    """A TQC + HER PandaReach agent (1,500 steps: what is checked is the path, not the arm's skill): its ORT int8
    and C int8 artifacts take the keys flat in the order policy.json records, pass their gates, and `verify`
    accepts both folders; the plain client's ``prepare`` turns the env's Dict into the artifact's input. Noise on
    the goal estimate in metres plays."""
    pytest.importorskip("panda_gym")
    cache = tmp_path / "agents"
    code, _, err = cli("train", "--algo", "tqc", "--env", "PandaReach-v3", "-n", "1500", "--cache", cache)
    assert code == 0, err
    agent = ("--algo", "tqc", "--env", "PandaReach-v3", "--folder", cache, "--store", tmp_path / "q.sqlite")
    certify = ("--outcome", "success", "--tolerance-abs", "0.5", "--max-episodes", "20")
    for backend in ("ort-int8-static", "c-int8"):
        out = tmp_path / backend
        code, text, err = cli("export", *agent, "--backend", backend, "--out", out, *certify)
        assert code == 0, err
        contract = json.loads((out / "policy.json").read_text())
        observation = contract["observation"]
        assert [key["name"] for key in observation["keys"]] == ["achieved_goal", "desired_goal", "observation"]
        assert observation["shape"] == [12] and observation["features"][3] == "desired_goal[0]"
        assert contract["env_id"] == "panda_gym:PandaReach-v3"  # the client imports the package that registers it
        assert contract["parity"]["passed"], contract["parity"]
        assert (
            "concatenated in this order: `achieved_goal` (3), `desired_goal` (3), `observation` (6)"
            in (out / "README.md").read_text()
        )
        code, text, err = cli("verify", out)
        assert code == 0 and re.search(r"passed|0 mismatches", text), err + text
    prepare = subprocess.run(
        [sys.executable, "-c", PREPARE_PROBE],
        cwd=tmp_path / "ort-int8-static",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert prepare.returncode == 0 and prepare.stdout.split()[-2:] == ["(3,)", "True"], prepare.stderr
    code, text, err = cli("run", *agent, "--bits", "8", "-n", "4", "--perturb", "obs-noise-raw@desired_goal=0.02")
    assert code == 0 and "int8" in text, err


PREPARE_PROBE = """
import json, numpy as np, onnxruntime as ort
from quarl_bench.deploy.contract import PREPARE
contract = json.load(open("policy.json"))
exec(PREPARE)
env = __import__("gymnasium").make(contract["env_id"])
obs, _ = env.reset(seed=1)
session = ort.InferenceSession("policy.onnx")
action = session.run(None, {"obs": prepare(obs)[None].astype(np.float32)})[0][0]
flat = np.concatenate([obs["achieved_goal"], obs["desired_goal"], obs["observation"]])
print(action.shape, bool(np.array_equal(prepare(obs), flat)))
"""


def test_a_failed_gate_names_its_worst_rows_and_the_input_outside_its_range() -> None:
    """An artifact off by 10 steps on one state, whose second feature lies far outside the other states': the
    refusal names how many states fail, which, the action dimension and that feature."""
    from quarl_bench.deploy.parity import failing_rows, parity

    rng = np.random.default_rng(0)
    states = rng.normal(size=(100, 3)).astype(np.float32)
    states[42, 1] = 40.0
    claimed = np.tanh(states[:, :2])
    step = 2 / 255

    def run(observation: np.ndarray) -> np.ndarray:
        off = np.zeros((len(observation), 2))
        off[:, 1] = np.where(observation[:, 1] > 30, 10 * step, 0.0)
        return np.tanh(observation[:, :2]) + off

    figures = parity(run, states, claimed, claimed, None, (-np.ones(2), np.ones(2)), "int8")
    assert not figures["passed"] and figures["worst_states"][0] == 42 and figures["states_over_limit"] == 1
    text = failing_rows(figures, ["x", "goal[0]", "z"], states)
    assert text.startswith("1 of 100 states over the limit (worst: states #42")
    assert "action dimension 1" in text and "the worst state's goal[0] lies" in text


def test_wider_starts_on_a_panda_task_widen_its_goal_range_in_x_and_y() -> None:
    """init-spread=1 on PandaReach: goals drawn from a range twice as wide in x and y (z unchanged, above the table),
    by the env's own seeded generator, so two wrappers of one seed draw the same goals."""
    pytest.importorskip("panda_gym")
    from quarl_bench.evaluation.perturbations import PerturbedEnv, condition_for
    from quarl_bench.zoo.quiet import native_output_silenced

    condition = parse_perturbation(condition_for("init-spread=1", "PandaReach-v3"))
    goals = []
    for _ in range(2):
        with native_output_silenced():
            venv = DummyVecEnv([lambda: gym.make("PandaReach-v3")])
            venv.seed(4)
            env = PerturbedEnv(venv, condition, 0, None)
        task = env.bases[0].task
        assert task.goal_range_low.tolist() == pytest.approx([-0.3, -0.3, 0.0])
        assert task.goal_range_high.tolist() == pytest.approx([0.3, 0.3, 0.3])
        goals.append(env.reset()["desired_goal"].copy())
        env.close()
    assert np.array_equal(goals[0], goals[1])
