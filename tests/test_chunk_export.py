"""Chunk and denoising policies exported: the artifact's own runtime (numpy and ONNX Runtime) plays the loop the torch
policy plays, action for action from the same noise; ``export`` writes a folder whose check.py and client run alone,
whose certificate names the bytes of graph, sidecar and runtime together; backends that cannot run the loop refuse."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from quarl_bench.deploy.backends import build, runner
from quarl_bench.deploy.chunk_artifact import ChunkForm
from quarl_bench.zoo.chunk_policies import chunked_policy, declared_chunk

DATA = Path(__file__).parent / "data"
BOX = spaces.Box(-1.0, 1.0, (2,), np.float32)
ACTIONS = spaces.Box(-2.0, 2.0, (2,), np.float32)


class Denoiser(torch.nn.Module):
    """A random linear denoiser that reads all three inputs, so the final chunk depends on every step's noise."""

    def __init__(self, declaration: dict) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.net = torch.nn.Linear(3 * 2 + 2 + 1, 3 * 2)
        self.denoising = declaration

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor, observation: torch.Tensor) -> torch.Tensor:
        inputs = torch.cat([sample.flatten(1), observation, timestep.float()[:, None] / 100], dim=1)
        return self.net(inputs).reshape(sample.shape[0], 3, 2)


class Chunker(torch.nn.Module):
    """A random chunker whose actions overshoot the bounds (so clipping before or after ensembling would differ)."""

    def __init__(self, declaration: dict) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.net = torch.nn.Linear(2, 3 * 2)
        self.action_chunk = declaration

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return 3 * self.net(observation)


@pytest.mark.parametrize(
    "module",
    [
        Denoiser({"size": 3, "execute": 2, "scheduler": "ddpm", "steps": 8}),
        Denoiser({"size": 3, "execute": 3, "scheduler": "ddim", "steps": 5, "prediction": "sample"}),
        Chunker({"size": 3, "execute": 2}),
        Chunker({"size": 3, "ensemble": 0.5}),
    ],
    ids=["ddpm", "ddim-sample", "open-loop", "ensemble"],
)
def test_the_artifact_runtime_plays_the_policys_loop_from_the_same_noise(module: torch.nn.Module) -> None:
    policy = chunked_policy(BOX, ACTIONS, module, declared_chunk(module, "test"))
    artifact = build("ort-fp32", ChunkForm(policy, BOX), np.zeros((1, 2), np.float32))
    run = runner(artifact)
    rng = np.random.default_rng(0)
    state, memory, played, expected = None, run.zero_state(2), [], []
    for step in range(12):  # two envs; the second starts a new episode at step 5
        observation = rng.uniform(-1, 1, (2, 2)).astype(np.float32)
        starts = np.array([step == 0, step in (0, 5)])
        actions, state = policy.predict(observation, state, starts)
        memory = run.started(memory, starts)
        acted, memory = run.step(observation, memory)
        expected.append(actions)
        played.append(acted)
    assert np.abs(np.array(played) - np.array(expected)).max() < 1e-5
    fresh = rng.uniform(-1, 1, (16, 2)).astype(np.float32)
    assert np.abs(run(fresh) - policy.predict(fresh)[0]).max() < 1e-5  # the gate's fresh-state first actions


def test_a_denoising_policy_exports_with_its_loop_and_the_folder_runs_alone(cli, tmp_path: Path) -> None:
    sys.path.insert(0, str(DATA))
    env = ("--env", "ReachLineContinuous-v0", "--env-package", "reach_line")
    agent = ("--policy-module", f"{DATA / 'denoise_reach.py'}:ddim", *env)
    flags = ("--outcome", "success", "--tolerance-abs", "0.1", "--store", tmp_path / "q.sqlite")
    code, out, err = cli("export", *agent, "--backend", "ort-fp32", "--out", tmp_path / "art", *flags)
    assert code == 0, err
    folder = tmp_path / "art"
    assert {p.name for p in folder.iterdir()} == {
        "policy.onnx",
        "chunk.json",
        "runtime.py",
        "vectors.npz",
        "check.py",
        "policy.json",
        "README.md",
    }
    contract = json.loads((folder / "policy.json").read_text())
    sidecar = json.loads((folder / "chunk.json").read_text())
    assert sidecar == contract["chunk"] and sidecar["denoising"]["timesteps"] == list(range(90, -1, -10))
    assert contract["certification"]["against_fp32"]["verdict"] == "safe"
    assert contract["parity"]["passed"] and contract["parity"]["max_abs_error"] < 1e-5
    whole = b"".join((folder / name).read_bytes() for name in ("policy.onnx", "chunk.json", "runtime.py"))
    assert contract["certification"]["artifact_sha256"] == hashlib.sha256(whole).hexdigest()
    assert np.load(folder / "vectors.npz")["noise"].shape == (256, 1 + 10, 4, 1)
    checked = subprocess.run([sys.executable, "check.py"], cwd=folder, capture_output=True, text=True)
    assert checked.returncode == 0 and "passed" in checked.stdout, checked.stdout + checked.stderr
    client = re.search(r"```python\n(.*?)```", (folder / "README.md").read_text(), re.S).group(1)
    played = subprocess.run([sys.executable, "-c", client], cwd=folder, capture_output=True, text=True)
    assert played.returncode == 0 and played.stdout.startswith("return "), played.stderr
    code, _, err = cli("export", *agent, "--backend", "ort-int8-static", "--out", tmp_path / "static", *flags)
    assert code == 2 and "cannot play a chunk policy" in err and "ort-int8-dynamic" in err
    assert not (tmp_path / "static").exists()
    _loaded_as_a_model(cli, folder, tmp_path)


def _loaded_as_a_model(cli, folder: Path, tmp_path: Path) -> None:
    """The folder's graph and sidecar as ``--model``: the loop played around the graph, certified with its shape
    named; a sidecar without statistics, or with an unknown scheduler, refused in one line."""
    env = ("--env", "ReachLineContinuous-v0", "--env-package", "reach_line", "--store", tmp_path / "m.sqlite")
    flags = ("--bits", "8", "--outcome", "success", "--tolerance-abs", "0.1", "--json")
    code, out, err = cli("certify", "--model", folder / "policy.onnx", *env, *flags)
    assert code == 0, err
    verdict = json.loads(out.splitlines()[-1])["verdicts"][0]
    assert verdict["verdict"] == "safe" and verdict["reference_successes"] == verdict["outcome_pairs"] == 40
    assert verdict["policy_shape"] == "chunk 4, 2 executed; ddim 10 steps (epsilon, 100 trained)"
    sidecar = json.loads((folder / "chunk.json").read_text())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "policy.onnx").write_bytes((folder / "policy.onnx").read_bytes())
    unknown = sidecar | {"denoising": sidecar["denoising"] | {"scheduler": "euler"}}
    missing = {key: value for key, value in sidecar.items() if key != "normalization"}
    for written, message in ((unknown, "unknown denoising scheduler 'euler'"), (missing, "no observation normal")):
        (bad / "chunk.json").write_text(json.dumps(written))
        code, _, err = cli("run", "--model", bad / "policy.onnx", *env, "--bits", "8", "-n", "2")
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_a_loaded_chunk_graph_quantizes_as_its_torch_module_does(tmp_path: Path) -> None:
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.types import QuantSpec
    from quarl_bench.zoo.onnx_chunk import onnx_chunk_policy

    module = Denoiser({"size": 3, "execute": 2, "scheduler": "ddim", "steps": 6})
    policy = chunked_policy(BOX, ACTIONS, module, declared_chunk(module, "test"))
    artifact = build("ort-fp32", ChunkForm(policy, BOX), np.zeros((1, 2), np.float32))
    for name, data in artifact.files:
        (tmp_path / name).write_bytes(data)
    loaded = onnx_chunk_policy((tmp_path / "policy.onnx").read_bytes(), tmp_path / "chunk.json", BOX, ACTIONS)
    fresh = np.random.default_rng(1).uniform(-1, 1, (8, 2)).astype(np.float32)
    assert np.abs(loaded.predict(fresh)[0] - policy.predict(fresh)[0]).max() < 1e-5
    spec = QuantSpec("int4")
    graph_int4, torch_int4 = quantize(loaded, spec)[0].predict(fresh)[0], quantize(policy, spec)[0].predict(fresh)[0]
    assert np.abs(graph_int4 - torch_int4).max() < 1e-4 < np.abs(graph_int4 - policy.predict(fresh)[0]).max()


class GoalLine(gym.Env):
    """A Dict-observation reach in one dimension (5 steps), to play fidelity's side-by-side on."""

    observation_space = spaces.Dict(
        {"desired_goal": spaces.Box(-1, 1, (1,), np.float32), "observation": spaces.Box(-1, 1, (1,), np.float32)}
    )
    action_space = ACTIONS

    def reset(self, seed=None, options=None):  # noqa: ANN001, ANN201
        super().reset(seed=seed)
        self.x, self.goal, self.t = 0.0, float(self.np_random.uniform(-1, 1)), 0
        return self._obs(), {}

    def _obs(self) -> dict[str, np.ndarray]:
        return {"desired_goal": np.array([self.goal], np.float32), "observation": np.array([self.x], np.float32)}

    def step(self, action):  # noqa: ANN001, ANN201
        self.x, self.t = float(np.clip(self.x + 0.1 * action[0], -1, 1)), self.t + 1
        return self._obs(), -abs(self.x - self.goal), False, self.t >= 5, {}


def test_fidelity_plays_a_chunk_policy_on_dict_observations_side_by_side() -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from quarl_bench.evaluation.fidelity import side_by_side
    from quarl_bench.evaluation.fidelity_over_time import over_time
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.types import QuantSpec

    space = GoalLine.observation_space
    module = Chunker({"size": 3, "execute": 2})
    policy = chunked_policy(space, ACTIONS, module, declared_chunk(module, "test"))
    quantized = quantize(policy, QuantSpec("int2"))[0]
    envs = [DummyVecEnv([GoalLine, GoalLine]) for _ in range(4)]
    for env in envs:
        env.seed(3)
    found = side_by_side(policy, quantized, envs[0], envs[1], threshold=1e-6)
    assert found.lengths == [5, 5] and all(step is not None for step in found.first_action)
    steps = over_time(policy, quantized, envs[2])
    assert steps.alive == [2] * 5 and steps.hidden_error == [] and sum(steps.action_error) > 0
