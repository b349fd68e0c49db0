"""Every agent flag reaches every kind of policy, or is refused in one line: ``--env-kwargs``, ``--vecnormalize`` and
``--env-package`` for zoo agents, SB3 zips, ONNX files, ``--policy-module`` and in-memory objects (the API). Honoured
means the env is made with it and the agent's identity, name and provenance show it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from quarl_bench.api import AgentQuery, resolve
from quarl_bench.errors import QuarlError
from quarl_bench.store.agent_names import agent_name
from quarl_bench.store.provenance import agent_provenance
from quarl_bench.zoo.forms import load_agent

DATA = Path(__file__).parent / "data"
KINDS = ("sb3 zip", "onnx file", "policy module", "torch object", "sb3 object")


def tiny_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One policy of each kind for FlagEnv-v0, and a VecNormalize file for it."""
    sys.path.insert(0, str(DATA))
    import flag_env  # noqa: F401  (registers FlagEnv-v0)
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    folder = tmp_path_factory.mktemp("kinds")
    model = PPO("MlpPolicy", "FlagEnv-v0", n_steps=64, batch_size=64, seed=0, device="cpu")
    model.save(folder / "agent.zip")
    torch.onnx.export(tiny_net(), torch.zeros(1, 4), folder / "policy.onnx", input_names=["obs"], dynamo=False)
    (folder / "net.py").write_text(
        "import torch\n\n\ndef make():\n    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))\n"
    )
    VecNormalize(DummyVecEnv([lambda: __import__("flag_env").FlagEnv()])).save(folder / "vecnormalize.pkl")
    return {
        "sb3 zip": {"model": str(folder / "agent.zip")},
        "onnx file": {"model": str(folder / "policy.onnx")},
        "policy module": {"policy_module": f"{folder / 'net.py'}:make"},
        "torch object": {"model": tiny_net()},
        "sb3 object": {"model": model},
        "vecnormalize": str(folder / "vecnormalize.pkl"),
    }


@pytest.mark.parametrize("kind", KINDS)
def test_env_kwargs_reach_the_env_the_identity_and_the_name(policies: dict, kind: str) -> None:
    plain = resolve(AgentQuery("FlagEnv-v0", **policies[kind]))
    ref = resolve(AgentQuery("FlagEnv-v0", env_kwargs={"reward_per_step": 2.0}, **policies[kind]))
    env = load_agent(ref).make_env(1, 0)
    assert env.get_attr("reward_per_step") == [2.0]  # the env received it
    env.close()
    assert ref.content_hash != plain.content_hash  # p:0.0 and p:0.5 are two agents' rows, not one
    assert "reward_per_step" in agent_name(
        ref.algo, ref.env_id, ref.source, ref.model_path, ref.content_hash, ref.env_kwargs
    )
    assert agent_provenance(ref)["env_kwargs"] == '{"reward_per_step": 2.0}'


@pytest.mark.parametrize("kind", KINDS)
def test_vecnormalize_wraps_the_env_and_enters_the_identity(policies: dict, kind: str) -> None:
    from stable_baselines3.common.vec_env import VecNormalize

    plain = resolve(AgentQuery("FlagEnv-v0", **policies[kind]))
    ref = resolve(AgentQuery("FlagEnv-v0", vecnormalize=policies["vecnormalize"], **policies[kind]))
    env = load_agent(ref).make_env(1, 0)
    assert isinstance(env, VecNormalize)
    env.close()
    assert ref.content_hash != plain.content_hash and agent_provenance(ref)["vecnormalize"] == ref.vecnormalize


@pytest.mark.parametrize("kind", KINDS)
def test_env_package_is_recorded_for_every_process(policies: dict, kind: str) -> None:
    ref = resolve(AgentQuery("FlagEnv-v0", env_packages=("flag_env",), **policies[kind]))
    assert ref.env_packages == ("flag_env",) and agent_provenance(ref)["env_packages"] == ["flag_env"]


def test_a_zoo_agent_takes_env_package_and_refuses_the_others_in_one_line(zoo: Path, policies: dict) -> None:
    ref = resolve(AgentQuery("CartPole-v1", "dqn", folder=str(zoo), use_hub=False, env_packages=("flag_env",)))
    assert ref.env_packages == ("flag_env",)
    for flags, named in (({"env_kwargs": {"x": 1}}, "--env-kwargs"), ({"vecnormalize": "v.pkl"}, "--vecnormalize")):
        with pytest.raises(QuarlError) as refused:
            resolve(AgentQuery("CartPole-v1", "dqn", folder=str(zoo), use_hub=False, **flags))
        assert named in str(refused.value) and "\n" not in str(refused.value)


def test_policy_module_env_kwargs_from_the_cli_change_the_numbers(cli, policies: dict, tmp_path: Path) -> None:
    """The issue's case: --env-kwargs p:0.0 and p:0.5 gave the env default's numbers for a --policy-module."""
    store = tmp_path / "q.sqlite"
    module = policies["policy module"]["policy_module"]
    means = []
    for value in ("1.0", "3.0"):
        args = ("run", "--policy-module", module, "--env", "FlagEnv-v0", "--env-package", "flag_env", "--bits", "8")
        code, out, err = cli(*args, "--env-kwargs", f"reward_per_step:{value}", "-n", "2", "--store", store)
        assert code == 0, err
        assert f"reward_per_step:{value}" in out.replace(" ", "").replace('"', "") or "reward_per_step" in out
    from quarl_bench.store.results import load_results

    rows = load_results(store)
    means = sorted(rows[rows["precision"] == "fp32"]["mean_reward"])
    assert means == [10.0, 30.0]
