"""A user's own policy, no zoo folder anywhere: an SB3 zip trained here on a custom env defined in a temporary
module (``module:EnvId``), its torch-module and ONNX forms, the Python API, and the bad inputs of each."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from quarl_bench.store.results import load_results

CORRIDOR = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Corridor(gym.Env):
    """Walk right from 0 to 1 in steps of 0.1 (action 1), or left (action 0): rewarded for progress, +1 at the end."""

    observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, step=0.1):
        self.step_size = step

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.position = float(self.np_random.uniform(0.0, 0.3))
        return self._obs(), {}

    def _obs(self):
        return np.array([self.position, 1.0 - self.position], np.float32)

    def step(self, action):
        before = self.position
        self.position = min(max(self.position + (self.step_size if action == 1 else -self.step_size), 0.0), 1.0)
        done = self.position >= 1.0
        return self._obs(), self.position - before + (1.0 if done else 0.0), done, False, {}


gym.register("Corridor-v0", entry_point=Corridor, max_episode_steps=30)
'''
POLICY_MODULE = '''
import torch
from torch import nn


def from_weights():
    """The PPO zip's acting network as a plain torch module (CleanRL's shape): observations -> logits."""
    net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    net.load_state_dict(torch.load(__file__.replace(".py", ".pt")))
    return net


def wrong_shape():
    return nn.Linear(2, 3)


def not_a_module():
    return 42
'''


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``corridor_env.py``, a PPO zip trained on it, the same network as a torch module file and as an
    ONNX graph; the folder is on ``sys.path`` (as the user's own package would be)."""
    from stable_baselines3 import PPO

    folder = tmp_path_factory.mktemp("own")
    (folder / "corridor_env.py").write_text(textwrap.dedent(CORRIDOR))
    sys.path.insert(0, str(folder))
    import corridor_env  # noqa: F401  (registers Corridor-v0)

    model = PPO(
        "MlpPolicy",
        "Corridor-v0",
        n_steps=128,
        batch_size=64,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [16], "activation_fn": torch.nn.Tanh},
    )
    model.learn(4096)
    model.save(folder / "corridor_ppo.zip")
    net = torch.nn.Sequential(model.policy.mlp_extractor.policy_net[0], torch.nn.Tanh(), model.policy.action_net)
    torch.save(
        {"0.weight": net[0].weight, "0.bias": net[0].bias, "2.weight": net[2].weight, "2.bias": net[2].bias},
        folder / "corridor_policy.pt",
    )
    (folder / "corridor_policy.py").write_text(textwrap.dedent(POLICY_MODULE))
    torch.onnx.export(
        net,
        (torch.zeros(1, 2),),
        str(folder / "corridor.onnx"),
        input_names=["x"],
        output_names=["logits"],
        dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}},
        dynamo=False,
    )
    yield folder
    sys.path.remove(str(folder))


def rewards(store: Path) -> dict[str, float]:
    frame = load_results(store)
    return dict(zip(frame["precision"], frame["mean_reward"], strict=True))


def test_own_zip_on_a_custom_env_runs_reuses_and_names_its_file(cli, own: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = (
        "run",
        "--model",
        own / "corridor_ppo.zip",
        "--env",
        "corridor_env:Corridor-v0",
        "--bits",
        "32",
        "8",
        "4",
        "-n",
        "10",
        "--store",
        store,
    )
    code, out, err = cli(*args)
    assert code == 0, err
    frame = load_results(store)
    assert sorted(frame["precision"]) == ["fp32", "int4", "int8"] and set(frame["algo"]) == {"ppo"}  # read from zip
    assert set(frame["agent_path"]) == {str(own / "corridor_ppo.zip")} and set(frame["env_id"]) == {"Corridor-v0"}
    assert frame["provenance"].map(lambda p: p["env_packages"]).tolist() == [["corridor_env"]] * 3
    code, out, err = cli(*args)  # a rerun reuses every row
    assert code == 0 and out.count("reused from the store") == 3


def test_a_module_in_the_current_folder_registers_envs_from_the_console_script(own: Path, tmp_path: Path) -> None:
    """As a user runs it, in the folder of their env module: the console script with ``module:EnvId``, and
    ``python -m quarl_bench`` with rl-zoo3's ``--gym-packages``; both find ``corridor_env.py`` there."""
    import os
    import subprocess

    script = Path(sys.executable).parent / "quarl-bench"
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    common = ("--model", "corridor_ppo.zip", "--bits", "32", "-n", "2", "--store", str(tmp_path / "q.sqlite"))
    runs = (
        [str(script), "run", "--env", "corridor_env:Corridor-v0", *common],
        [sys.executable, "-m", "quarl_bench", "run", "--env", "Corridor-v0", "--gym-packages", "corridor_env", *common],
    )
    for command in runs:
        done = subprocess.run(command, cwd=own, env=environment, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert load_results(tmp_path / "q.sqlite")["env_id"].tolist() == ["Corridor-v0"]  # the second run reused it


def test_the_report_names_each_agent_as_a_person_knows_it(cli, own: Path, tmp_path: Path) -> None:
    """One zip with and without --env-kwargs: two agents, two names (the file, its env kwargs, a short hash), in
    the console and in every table; widths worded with one vocabulary; seeds counted; no NaN printed."""
    import pandas as pd

    store, out_dir = tmp_path / "q.sqlite", tmp_path / "report"
    run = ("run", "--model", own / "corridor_ppo.zip", "--env", "corridor_env:Corridor-v0", "--bits", "32", "8", "2")
    for extra in ((), ("--env-kwargs", "step:0.2")):
        code, out, err = cli(*run, "-n", "4", "--store", store, *extra)
        assert code == 0, err
        assert "corridor_ppo.zip" in out and ("(step:0.2)" in out) == bool(extra)  # the table's title names it
    code, out, err = cli("report", "--store", store, "--out", out_dir)
    assert code == 0, err
    assert "NaN" not in out and "(step:0.2) #" in out
    safe = pd.read_csv(out_dir / "minimum_safe_bits.csv")
    names = sorted(safe["agent"])
    assert len(names) == 2 and all(
        name.endswith(tuple("0123456789abcdef")) and "corridor_ppo.zip" in name for name in names
    )
    assert ["(step:0.2)" in name for name in names].count(True) == 1
    assert set(safe["seeds"]) == {1}
    assert all(re.fullmatch(r"(≤ |> )?\d+", str(value)) for value in safe["minimum safe bits"])
    frame = load_results(store)
    assert sorted(set(frame["agent"])) == names  # the same names in Python


def test_torch_module_and_onnx_forms_score_as_the_zip(cli, own: Path, tmp_path: Path) -> None:
    env = ("--env", "corridor_env:Corridor-v0", "--bits", "32", "4", "-n", "10")
    forms = {
        "zip": ("--model", own / "corridor_ppo.zip"),
        "module": ("--policy-module", f"{own / 'corridor_policy.py'}:from_weights"),
        "onnx": ("--model", own / "corridor.onnx"),
    }
    found = {}
    for name, agent in forms.items():
        code, _, err = cli("run", *agent, *env, "--store", tmp_path / f"{name}.sqlite")
        assert code == 0, err
        found[name] = rewards(tmp_path / f"{name}.sqlite")
    assert found["module"]["fp32"] == found["zip"]["fp32"] == found["onnx"]["fp32"]
    assert found["module"]["int4"] == found["onnx"]["int4"]  # ONNX initializers rewritten on the same 4-bit grid
    frame = load_results(tmp_path / "onnx.sqlite")
    assert set(frame["algo"]) == {"onnx"} and len(frame.loc[frame["precision"] == "int4", "layers"].iloc[0]) == 2


def test_deploy_and_export_an_onnx_policy(cli, own: Path, tmp_path: Path) -> None:
    agent = ("--model", own / "corridor.onnx", "--env", "corridor_env:Corridor-v0")
    code, out, err = cli("deploy", *agent, "--backend", "ort-int8-dynamic", "-n", "5", "--store", tmp_path / "d.sqlite")
    assert code == 0, err
    frame = load_results(tmp_path / "d.sqlite")
    assert sorted(frame["backend"]) == ["ort-int8-dynamic", "torch-fp32"]
    int8 = frame.set_index("backend").loc["ort-int8-dynamic", "provenance"]["deployment"]
    assert int8["graph"].get("INT8", 0) + int8["graph"].get("UINT8", 0) >= 2  # both weight matrices int8
    store = ("--store", tmp_path / "e.sqlite")
    code, _, err = cli("export", *agent, "--backend", "ort-int8-dynamic", "--out", tmp_path / "p", *store)
    assert code == 0, err
    import onnxruntime as ort

    session = ort.InferenceSession(str(tmp_path / "p" / "policy.onnx"), providers=["CPUExecutionProvider"])
    actions = session.run(None, {"obs": np.array([[0.5, 0.5], [0.9, 0.1]], np.float32)})[0]
    assert actions.dtype == np.int64 and actions.shape == (2,)


class OnnxableSB3Policy(torch.nn.Module):
    """SB3's documented ONNX export recipe: ``policy(obs, deterministic=True)`` -> (actions, values, log_prob)."""

    def __init__(self, policy) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, observation: torch.Tensor):
        return self.policy(observation, deterministic=True)


def test_onnx_round_trip_and_sb3_recipe_play_greedy_on_their_actions(cli, own: Path, tmp_path: Path) -> None:
    """export -> --model -> export gives the zip's rewards at every step, and a graph exported with SB3's own recipe
    (action outputs, a fixed batch of 1, a value head) plays the same; both are announced as greedy-only."""
    from stable_baselines3 import PPO

    env = ("--env", "corridor_env:Corridor-v0")
    play = (*env, "--bits", "32", "4", "-n", "10")
    store = ("--store", tmp_path / "e.sqlite")
    code, _, err = cli(
        "export",
        "--model",
        own / "corridor_ppo.zip",
        *env,
        "--backend",
        "ort-fp32",
        "--out",
        tmp_path / "first",
        *store,
    )
    assert code == 0, err
    first, second = tmp_path / "first" / "policy.onnx", tmp_path / "second" / "policy.onnx"
    code, _, err = cli("export", "--model", first, *env, "--backend", "ort-fp32", "--out", second.parent, *store)
    assert code == 0, err
    model = PPO.load(own / "corridor_ppo.zip", device="cpu")
    sb3_graph = tmp_path / "sb3_recipe.onnx"
    torch.onnx.export(
        OnnxableSB3Policy(model.policy), (torch.zeros(1, 2),), str(sb3_graph), input_names=["input"], dynamo=False
    )
    found = {}
    for name, agent in {"zip": own / "corridor_ppo.zip", "first": first, "second": second, "sb3": sb3_graph}.items():
        code, _, err = cli("run", "--model", agent, *play, "--store", tmp_path / f"{name}.sqlite")
        assert code == 0, err
        if name != "first":  # (first was announced once already, when the export of second loaded it)
            assert ("outputs actions, not logits: played greedy" in err) == (name != "zip")
        # SB3's recipe writes actions, values and log-probabilities: the one played is named
        assert ("has 3 outputs" in err and "the first," in err) == (name == "sb3")
        found[name] = rewards(tmp_path / f"{name}.sqlite")
    assert found["first"] == found["second"] == found["sb3"]
    assert found["first"]["fp32"] == found["zip"]["fp32"]
    sb3_layers = load_results(tmp_path / "sb3.sqlite").set_index("precision").loc["int4", "layers"]
    assert [layer["shape"] for layer in sb3_layers] == [[16, 2], [2, 16]]  # the value head is left alone


def test_python_api_gives_the_cli_numbers(cli, own: Path, tmp_path: Path) -> None:
    from quarl_bench import evaluate_agent
    from quarl_bench.zoo.foreign import load_module_function

    code, _, err = cli(
        "run",
        "--model",
        own / "corridor_ppo.zip",
        "--env",
        "corridor_env:Corridor-v0",
        "--bits",
        "32",
        "8",
        "-n",
        "10",
        "--store",
        tmp_path / "cli.sqlite",
    )
    assert code == 0, err
    by_path = evaluate_agent(own / "corridor_ppo.zip", "corridor_env:Corridor-v0", ("fp32", "int8"), episodes=10)
    assert dict(zip(by_path["precision"], by_path["mean_reward"], strict=True)) == rewards(tmp_path / "cli.sqlite")
    assert by_path.set_index("precision").loc["int8", "E %"] == pytest.approx(
        load_results(tmp_path / "cli.sqlite").set_index("precision").loc["int8", "E %"]
    )
    import corridor_env
    import gymnasium as gym

    module = load_module_function(f"{own / 'corridor_policy.py'}:from_weights")

    def factory():
        return gym.wrappers.TimeLimit(corridor_env.Corridor(), 30)

    by_object = evaluate_agent(module, factory, ("fp32",), episodes=10)  # an env factory, too
    assert by_object["mean_reward"].iloc[0] == rewards(tmp_path / "cli.sqlite")["fp32"]


def bad(cli, tmp_path: Path, *args) -> str:
    store = tmp_path / "bad.sqlite"
    code, out, err = cli(*args, "--store", store)
    assert code == 2 and len(err.strip().splitlines()) == 1, (code, err)
    assert not store.exists() or load_results(store).empty  # nothing stored
    return err


def test_bad_policy_files_and_envs_get_one_line(cli, own: Path, tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    env = ("--env", "corridor_env:Corridor-v0", "-n", "2")
    fake = tmp_path / "fake.zip"
    fake.write_text("not a zip")
    assert "is not an SB3 model" in bad(cli, tmp_path, "run", "--model", fake, *env)
    module = own / "corridor_policy.py"
    assert "has no function 'missing'" in bad(cli, tmp_path, "run", "--policy-module", f"{module}:missing", *env)
    err = bad(cli, tmp_path, "run", "--policy-module", f"{module}:wrong_shape", *env)
    assert "returned shape (2, 3)" in err and "expected (2, 2)" in err
    assert "expected a torch.nn.Module" in bad(cli, tmp_path, "run", "--policy-module", f"{module}:not_a_module", *env)
    two = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["a", "b"], ["c"])],
            "two",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2]) for n in "ab"],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 2])],
        )
    )
    onnx.save(two, tmp_path / "two.onnx")
    assert "has 2 inputs (a, b)" in bad(cli, tmp_path, "run", "--model", tmp_path / "two.onnx", *env)
    ints = helper.make_model(
        helper.make_graph(
            [helper.make_node("Identity", ["a"], ["c"])],
            "ints",
            [helper.make_tensor_value_info("a", TensorProto.INT64, [1, 2])],
            [helper.make_tensor_value_info("c", TensorProto.INT64, [1, 2])],
        )
    )
    onnx.save(ints, tmp_path / "ints.onnx")
    assert "is INT64: expected a float" in bad(cli, tmp_path, "run", "--model", tmp_path / "ints.onnx", *env)
    zip_ = ("--model", own / "corridor_ppo.zip")
    assert "unknown env 'NoSuchEnv-v0'" in bad(cli, tmp_path, "run", *zip_, "--env", "NoSuchEnv-v0")
    err = bad(cli, tmp_path, "run", *zip_, "--env", "CartPlole-v1")
    assert "did you mean 'CartPole-v1'" in err and "--env-package my_module" in err
    err = bad(cli, tmp_path, "run", *zip_, "--env", "Corridor-v0", "--env-package", "no_such_package")
    assert "cannot import env package 'no_such_package'" in err
    err = bad(cli, tmp_path, "run", *zip_, "--env", "CartPole-v1")
    assert "shape (2,)" in err and "(4,)" in err
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    stats = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    stats.save(tmp_path / "cartpole_vecnormalize.pkl")
    err = bad(cli, tmp_path, "run", *zip_, *env, "--vecnormalize", tmp_path / "cartpole_vecnormalize.pkl")
    assert "cartpole_vecnormalize.pkl" in err and "(4,)" in err and "(2,)" in err


def test_acting_layers_come_from_the_policy_object() -> None:
    """A custom features extractor (Linear + LayerNorm inside) and net_arch: its Linear acts and is quantized, the
    LayerNorm is listed as left in fp32, the value head is not touched."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    from quarl_bench.quant.layers import acting_layers, unquantized_modules
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.types import QuantSpec

    class Extractor(BaseFeaturesExtractor):
        def __init__(self, observation_space, features_dim: int = 8) -> None:
            super().__init__(observation_space, features_dim)
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.ELU())

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            return self.net(observations)

    model = PPO(
        "MlpPolicy",
        "CartPole-v1",
        device="cpu",
        policy_kwargs={
            "features_extractor_class": Extractor,
            "net_arch": {"pi": [12, 6], "vf": [5]},
            "activation_fn": torch.nn.ELU,
        },
    )
    names = [name for name, _ in acting_layers(model.policy)]
    assert names == [
        "features_extractor.net.0",
        "mlp_extractor.policy_net.0",
        "mlp_extractor.policy_net.2",
        "action_net",
    ]
    assert unquantized_modules(model.policy) == ["features_extractor.net.1 (LayerNorm)"]
    quantized, stats = quantize(model.policy, QuantSpec(2))
    original = model.policy.features_extractor.net[0].weight.detach()
    codes = torch.unique(quantized.features_extractor.net[0].weight.detach())
    step = (original.min().abs() + original.max().abs()) / 2**2  # QuaRL's grid: (|lo| + |hi|) / 2^bits
    assert len(stats) == 4 and 2 <= len(codes) <= 2**2 + 1  # the extractor's first layer is on a 2-bit grid
    assert torch.allclose(codes / step, torch.round(codes / step), atol=1e-4)
    assert torch.equal(quantized.value_net.weight, model.policy.value_net.weight)


def test_a_grid_of_policy_files(cli, own: Path, tmp_path: Path) -> None:
    grid = tmp_path / "own.yaml"
    grid.write_text(
        f"name: own\nepisodes: 5\ngrid:\n  - models: [{own / 'corridor_ppo.zip'}, {own / 'corridor.onnx'}]\n"
        "    envs: [corridor_env:Corridor-v0]\n    precisions: [fp32, 8]\n"
    )
    code, out, err = cli("sweep", grid, "--workers", "1", "--store", tmp_path / "grid.sqlite")
    assert code == 0, err
    frame = load_results(tmp_path / "grid.sqlite")
    assert sorted(zip(frame["algo"], frame["precision"], strict=True)) == [
        ("onnx", "fp32"),
        ("onnx", "int8"),
        ("ppo", "fp32"),
        ("ppo", "int8"),
    ]


def test_a_missing_extra_is_named_in_one_line() -> None:
    from quarl_bench.errors import QuarlError
    from quarl_bench.extras import EXTRAS, require

    with pytest.raises(
        QuarlError,
        match=r"^ActorQ needs the 'distributed' extra \(no_such_module is not installed\): "
        r"pip install 'quarl-bench\[distributed\]'$",
    ):
        require("distributed", "ActorQ", ("no_such_module",))
    require("deploy", "deploy")  # installed here: every module of the extra is found
    import tomllib

    declared = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert set(EXTRAS) <= set(declared["project"]["optional-dependencies"])  # each extra named is installable


class Residual(torch.nn.Module):
    """A network that is no chain: its output adds its input back (a skip connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.hidden(x)


def test_an_onnx_mlp_takes_what_its_torch_module_takes_and_another_graph_is_told_why_not(
    cli, own: Path, tmp_path: Path
) -> None:
    """corridor.onnx is one chain (Gemm, Tanh, Gemm): read back as torch, it takes activation quantization and
    GPTQ and scores exactly as the same network given as a torch module. A graph with a skip connection stays a
    graph: weight formats run on it, activation quantization is refused in one line naming the node."""
    env = ("--env", "corridor_env:Corridor-v0", "-n", "5", "--bits", "8", "4", "--act-bits", "8")
    forms = {
        "onnx": ("--model", own / "corridor.onnx"),
        "module": ("--policy-module", f"{own / 'corridor_policy.py'}:from_weights"),
    }
    found = {}
    for name, agent in forms.items():
        code, _, err = cli("run", *agent, *env, "--ptq", "gptq", "--store", tmp_path / f"{name}.sqlite")
        assert code == 0, err
        found[name] = rewards(tmp_path / f"{name}.sqlite")
    assert found["onnx"] == found["module"] and len(found["onnx"]) == 3
    residual = tmp_path / "residual.onnx"
    torch.onnx.export(
        Residual(), (torch.zeros(1, 2),), str(residual), input_names=["x"], dynamic_axes={"x": {0: "b"}}, dynamo=False
    )
    agent = ("--model", residual, "--env", "corridor_env:Corridor-v0", "-n", "5")
    code, _, err = cli("run", *agent, "--bits", "nvfp4", "fp8-e4m3", "--store", tmp_path / "f.sqlite")
    assert code == 0, err
    assert set(load_results(tmp_path / "f.sqlite")["precision"]) == {"fp32", "nvfp4", "fp8-e4m3"}
    store = tmp_path / "a.sqlite"
    code, _, err = cli("run", *agent, "--bits", "8", "--act-bits", "8", "--store", store)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "played as its own graph" in err and "Add node" in err and "does not continue one chain" in err
    assert not store.exists() or load_results(store).empty
    for backend, named in (("c-int8", "needs a torch policy"), ("ort-int8-static", "claims fake-quant")):
        out = tmp_path / backend
        code, _, err = cli("export", *agent[:4], "--backend", backend, "--out", out, "--store", store)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert named in err and "Add node" in err and "ort-fp32, ort-fp16, ort-int8-dynamic" in err
        assert not out.exists()


def test_an_exported_artifact_s_client_finds_the_user_s_env_module(cli, own: Path, tmp_path: Path) -> None:
    """The artifact README's client, run from the artifact folder as the README says (no PYTHONPATH), imports the
    user's env module from where export found it (``policy.json``'s ``env_module_folders``)."""
    import json
    import os
    import subprocess

    out = tmp_path / "artifact"
    agent = ("--model", own / "corridor_ppo.zip", "--env", "corridor_env:Corridor-v0")
    code, _, err = cli(
        "export", *agent, "--backend", "c-int8", "--out", out, "--max-episodes", "20", "--store", tmp_path / "q.sqlite"
    )
    assert code == 0, err
    assert json.loads((out / "policy.json").read_text())["env_module_folders"] == [str(own)]
    client = (out / "README.md").read_text().split("```python\n")[1].split("```")[0]
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", client], cwd=out, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) > 1.0  # reached the end of the corridor (+1 and the walk's progress)
