"""A continuous-control user's day, as the user has it: quarl-bench installed from the wheel built from this checkout
(on the installed dependencies), a folder outside the repository with their own env module and actor class, and the
path `run` -> `certify` -> `harden` -> `export` (c-int8 and ONNX Runtime) -> `report --html` -> the artifact's
README client. Every command exits 0 with no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

ENV_MODULE = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class PointReach(gym.Env):
    """A point mass on a plane pushed toward a target: observation (position, velocity, target), action a force in
    [-1, 1]^2, reward minus the distance, 50 steps."""

    observation_space = spaces.Box(-5.0, 5.0, (6,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1, 1, 2)
        self.velocity = np.zeros(2)
        self.target = self.np_random.uniform(-1, 1, 2)
        self.steps = 0
        return self._obs(), {}

    def _obs(self):
        return np.concatenate([self.position, self.velocity, self.target]).astype(np.float32)

    def step(self, action):
        self.velocity = 0.8 * self.velocity + 0.1 * np.clip(action, -1, 1)
        self.position = self.position + self.velocity
        self.steps += 1
        reward = -float(np.linalg.norm(self.position - self.target))
        return self._obs(), reward, False, self.steps >= 50, {}


gym.register("PointReach-v0", entry_point=PointReach)
'''

ACTOR_MODULE = '''
import torch
from torch import nn


class ReachActor(nn.Module):
    """A proportional-derivative controller written as an actor: ReLU features of the error, tanh, a scale buffer."""

    def __init__(self):
        super().__init__()
        self.features, self.head = nn.Linear(6, 4), nn.Linear(4, 2)
        self.register_buffer("action_scale", torch.tensor([1.0, 1.0]))
        error = torch.tensor([[-2.0, 0.0, -3.0, 0.0, 2.0, 0.0], [0.0, -2.0, 0.0, -3.0, 0.0, 2.0]])
        with torch.no_grad():
            self.features.weight.copy_(torch.cat([error, -error]))
            self.features.bias.zero_()
            self.head.weight.copy_(torch.tensor([[1.0, 0.0, -1.0, 0.0], [0.0, 1.0, 0.0, -1.0]]))
            self.head.bias.zero_()

    def forward(self, x):
        return torch.tanh(self.head(torch.relu(self.features(x)))) * self.action_scale


def make_actor():
    return ReachActor()
'''


@pytest.mark.heavy  # 23 s; the wheel: test_wheel
def test_a_continuous_control_user_s_day_from_the_wheel(tmp_path: Path) -> None:
    dist, target, work = tmp_path / "dist", tmp_path / "site", tmp_path / "reach"
    work.mkdir()
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(dist)]
    subprocess.run([*build, str(REPO)], check=True, cwd=tmp_path)
    wheel = next(dist.glob("quarl_bench-*.whl"))
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)]
    subprocess.run(install, check=True)
    (work / "point_env.py").write_text(textwrap.dedent(ENV_MODULE))
    (work / "reach_actor.py").write_text(textwrap.dedent(ACTOR_MODULE))
    environment = os.environ | {"PYTHONPATH": f"{target}{os.pathsep}{work}", "QUARL_ZOO": str(work / "no-zoo")}

    def quarl(*args: str, cwd: Path = work) -> str:
        done = subprocess.run(
            [str(target / "bin" / "quarl-bench"), *args],
            cwd=cwd,
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    agent = ("--policy-module", "reach_actor.py:make_actor", "--env", "point_env:PointReach-v0")
    store = ("--store", "reach.sqlite")
    printed = quarl("run", *agent, "--bits", "32", "8", "4", "-n", "20", *store)
    assert "% of range" in printed  # the action error in the action space's own units
    printed = quarl("certify", *agent, "--bits", "8", "4", "--max-episodes", "120", *store)
    assert "asymptotic" in printed  # no return bounds known for the user's env: said so
    quarl(
        "harden", *agent, "--bits", "4", "--granularity", "per-channel", "--budget", "400", "--out", "hard.onnx", *store
    )
    assert (work / "hard" / "module.py").is_file()
    for backend in ("c-int8", "ort-fp32"):
        quarl(
            "export", *agent, "--backend", backend, "--out", backend, "--max-episodes", "40", "--allow-degraded", *store
        )
    quarl("report", "--html", "--out", "report", *store)
    assert (work / "report" / "report.html").is_file() and len(list((work / "report").iterdir())) <= 20
    readme = (work / "c-int8" / "README.md").read_text()
    client = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    outside = {k: v for k, v in environment.items() if k != "PYTHONPATH"}  # the client: gymnasium, numpy, a compiler
    played = subprocess.run(
        [sys.executable, "-c", client], cwd=work / "c-int8", env=outside, capture_output=True, text=True, timeout=300
    )
    assert played.returncode == 0, played.stderr[-2000:]
    assert float(played.stdout.split()[-1]) > -60  # the controller reaches the target: random forces score ~ -100
