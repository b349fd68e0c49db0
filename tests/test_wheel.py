"""quarl-bench as a user installs it: the wheel built from this checkout, installed on its own (reusing the
installed dependencies), run from a folder outside the repository on an agent trained here on a custom env."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from quarl_bench.store.results import load_results

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

ENV_MODULE = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Beacon(gym.Env):
    """Say which side a beacon is on (action 0: left, 1: right): +1 when right, 20 guesses an episode."""

    observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self._draw(), {}

    def _draw(self):
        self.side = int(self.np_random.integers(2))
        noise = self.np_random.uniform(-0.2, 0.2, 2)
        return np.array([1.0 if self.side else -1.0, *noise], np.float32)

    def step(self, action):
        reward = 1.0 if int(action) == self.side else 0.0
        self.steps += 1
        return self._draw(), reward, False, self.steps >= 20, {}


gym.register("Beacon-v0", entry_point=Beacon)
'''


def test_installed_wheel_runs_a_model_on_a_custom_env_outside_the_repo(tmp_path: Path) -> None:
    dist, target, work = tmp_path / "dist", tmp_path / "site", tmp_path / "elsewhere"
    work.mkdir()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(dist),
            str(REPO),
        ],
        check=True,
        cwd=tmp_path,
    )
    wheel = next(dist.glob("quarl_bench-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "quarl_bench/zoo_configs/envs.yaml" in names and "quarl_bench/zoo_configs/paper/quarl_table2.csv" in names
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)],
        check=True,
    )

    (work / "beacon_env.py").write_text(textwrap.dedent(ENV_MODULE))
    train = (
        "import beacon_env\nfrom stable_baselines3 import DQN\n"
        "model = DQN('MlpPolicy', 'Beacon-v0', learning_starts=200, seed=0, device='cpu')\n"
        "model.learn(2000)\nmodel.save('beacon_dqn.zip')\n"
    )
    env = os.environ | {"PYTHONPATH": f"{target}{os.pathsep}{work}"}
    subprocess.run([sys.executable, "-c", train], check=True, cwd=work, env=env)
    where = subprocess.run(
        [sys.executable, "-c", "import quarl_bench; print(quarl_bench.__file__)"],
        check=True,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    assert where.startswith(str(target))  # the installed wheel, not this checkout
    result = subprocess.run(
        [
            str(target / "bin" / "quarl-bench"),
            "run",
            "--model",
            "beacon_dqn.zip",
            "--env",
            "beacon_env:Beacon-v0",
            "--bits",
            "32",
            "8",
            "4",
            "-n",
            "10",
            "--store",
            "q.sqlite",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    frame = load_results(work / "q.sqlite")
    assert sorted(frame["precision"]) == ["fp32", "int4", "int8"] and set(frame["algo"]) == {"dqn"}
    assert frame.set_index("precision").loc["fp32", "mean_reward"] == 20.0  # the beacon's side is in plain sight
