"""Deployment: exported artifacts act as the SB3 policy does, int8 artifacts hold int8 weights, the deploy command
plays them through the CLI, stores rows the report puts next to PTQ, and bad input fails in one line."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_atari_agent
from stable_baselines3 import PPO

from quarl_bench.deploy.backends import build, int8_weight_summary, runner
from quarl_bench.deploy.export import DeployablePolicy, check_equivalence, split_normalizer
from quarl_bench.deploy.machine import int8_features
from quarl_bench.deploy.targets import deploy_target
from quarl_bench.errors import QuarlError
from quarl_bench.methods.deploy import deploy_calibration_states
from quarl_bench.store import ResultStore
from quarl_bench.store.results import load_results
from quarl_bench.types import QuantSpec
from quarl_bench.zoo.agents import resolve_agent
from quarl_bench.zoo.forms import load_agent
from quarl_bench.zoo.policy import normalized_policy

pytestmark = pytest.mark.slow

AGENTS = [  # discrete, discrete Q-values, VecNormalize, continuous (tanh-squashed, unscaled to the bounds)
    ("ppo", "CartPole-v1"),
    ("dqn", "CartPole-v1"),
    ("a2c", "Acrobot-v1"),
    ("sac", "Pendulum-v1"),
]


def artifact_and_sb3_actions(folder: Path, algo: str, env_id: str, tmp_path: Path, states: int = 1000):
    agent = load_agent(resolve_agent(algo, env_id, folder, tmp_path / "cache", use_hub=False))
    env = agent.make_env(1, 0)
    raw, normalizer = split_normalizer(env)
    module = DeployablePolicy(agent.model.policy, raw.observation_space, normalizer).eval()
    env.close()
    observations = deploy_calibration_states(agent, states, seed=123)
    expected = normalized_policy(agent.model.policy, normalizer).predict(observations, deterministic=True)[0]
    return module, observations, expected, normalizer


@pytest.mark.parametrize(("algo", "env_id"), AGENTS, ids=[f"{a}-{e}" for a, e in AGENTS])
def test_exported_fp32_artifact_acts_as_the_sb3_policy(zoo: Path, tmp_path: Path, algo: str, env_id: str) -> None:
    module, observations, expected, normalizer = artifact_and_sb3_actions(zoo, algo, env_id, tmp_path)
    assert (normalizer is not None) == (algo == "a2c")  # the Acrobot agent's statistics are folded into the graph
    artifact = build("ort-fp32", module, observations[:1])
    actions = runner(artifact)(observations)
    assert check_equivalence(actions, expected, module.discrete) >= 0.999
    if not module.discrete:  # unscaled to Pendulum's [-2, 2], not left in the policy's [-1, 1]
        assert np.abs(actions).max() > 1.0 and np.abs(actions).max() <= 2.0


def test_exported_atari_cnn_takes_uint8_frames(zoo: Path, tmp_path: Path) -> None:
    folder = tiny_atari_agent(
        zoo,
        tmp_path / "atari",
        "ppo",
        lambda env: PPO("CnnPolicy", env, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu"),
    )
    module, observations, expected, _ = artifact_and_sb3_actions(folder, "ppo", "BreakoutNoFrameskip-v4", tmp_path, 200)
    assert observations.dtype == np.uint8 and observations.shape[1:] == (84, 84, 4)
    artifact = build("ort-fp32", module, observations[:1])
    assert check_equivalence(runner(artifact)(observations), expected, discrete=True) >= 0.999


def test_int8_artifacts_hold_int8_weights_and_integer_ops(zoo: Path, tmp_path: Path) -> None:
    module, observations, _, _ = artifact_and_sb3_actions(zoo, "dqn", "CartPole-v1", tmp_path, 200)
    dynamic = int8_weight_summary(build("ort-int8-dynamic", module, observations[:1]))
    static = int8_weight_summary(build("ort-int8-static", module, observations[:1], observations))
    # uint8 weights (zero point 128) in every ORT int8 graph: its u8 x u8 kernels cannot saturate on any x86 CPU
    assert dynamic["UINT8"] == 3 and dynamic["MatMulInteger"] == 3 and "INT8" not in dynamic
    # static: the first layer stays fp32 (raw observation input), the other two int8 with QDQ around them
    assert static["UINT8"] == 2 and static["FLOAT"] == 1 and static["QuantizeLinear"] >= 1
    assert static["DequantizeLinear"] >= 4
    fp16 = int8_weight_summary(build("ort-fp16", module, observations[:1]))
    assert set(fp16) == {"FLOAT16"}


def test_deploy_command_int8_static_plays_500_and_reports_next_to_ptq(cli, zoo: Path, tmp_path: Path) -> None:
    store, out = tmp_path / "quarl.sqlite", tmp_path / "report"
    common = ("--algo", "ppo", "--env", "CartPole", "--folder", zoo, "--store", store)
    code, text, err = cli("deploy", *common, "--backend", "ort-int8-static", "ort-int8-dynamic")
    assert code == 0, err
    assert "ort-int8-static" in text and "speed-up" in text
    assert cli("run", *common, "--bits", "8")[0] == 0
    rows = load_results(store)
    static = rows[rows["backend"] == "ort-int8-static"].iloc[0]
    assert static["method"] == "deploy" and static["mean_reward"] == 500.0 and static["episodes"] == 100
    deployment = static["provenance"]["deployment"]
    assert deployment["latency"]["calls"] >= 1000 and deployment["calibration"] == {"states": 1000, "method": "minmax"}
    assert len(deployment["artifact_sha256"]) == 64 and deployment["artifact_bytes"] > 0
    # the timing names its CPU: a VNNI and an AVX2 machine time int8 differently
    assert deployment["machine"]["int8_features"] == list(int8_features()) and deployment["machine"]["cpu"]
    assert cli("report", "--store", store, "--out", out)[0] == 0
    table = pd.read_csv(out / "deployment.csv").set_index("backend")
    assert sorted(table.index) == ["ort-int8-dynamic", "ort-int8-static", "torch-fp32"]
    ptq_int8 = rows[(rows["method"] == "ptq") & (rows["precision"] == "int8")].iloc[0]
    assert table.loc["ort-int8-static", "PTQ reward (simulated)"] == ptq_int8["mean_reward"]  # same agent, one table
    assert table.loc["ort-int8-static", "row key"] == static["key"]


def test_export_writes_an_artifact_that_runs_with_onnxruntime_alone(cli, zoo: Path, tmp_path: Path) -> None:
    out = tmp_path / "a2c-acrobot-int8"
    agent = ("--algo", "a2c", "--env", "Acrobot", "--folder", zoo)
    code, _, err = cli(
        "export", *agent, "--backend", "ort-int8-dynamic", "--out", out, "--store", tmp_path / "q.sqlite"
    )
    assert code == 0, err
    contract = json.loads((out / "policy.json").read_text())
    assert contract["observation"]["normalization_inside"]  # the zoo's a2c Acrobot runs under VecNormalize
    assert contract["files"]["policy.onnx"] == hashlib.sha256((out / "policy.onnx").read_bytes()).hexdigest()
    assert contract["parity"]["passed"] and contract["certification"]["against_claimed"]["verdict"] in (
        "equivalent",
        "undetermined",
    )
    probe = "import numpy as np, onnxruntime as ort, sys\ns = ort.InferenceSession(sys.argv[1])\n"
    probe += "print(s.run(None, {'obs': np.zeros((2, 6), np.float32)})[0].tolist())"
    done = subprocess.run(
        [sys.executable, "-c", probe, str(out / "policy.onnx")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() in ("[0, 0]", "[1, 1]", "[2, 2]")


def test_a_continuous_onnx_policy_exports_to_every_ort_backend_or_is_told_why_not(
    cli, zoo: Path, tmp_path: Path
) -> None:
    """sac Pendulum written as ONNX (by export) and exported again from that file, read back as its torch twin:
    ort-fp32 writes a Box contract; ort-int8-static passes its gate against a claim that keeps the observation in
    fp32, as its graph does, and was calibrated on the claim's own states (it missed by 5.5 steps on others, and by
    8.3 when its claim rounded the observation), playing the zoo agent's very artifact; ort-int8-dynamic fails
    its gate and the line names the cause (the raw observation on one int8 grid: velocity +-8 beside cos/sin +-1)
    and the remedy, writing nothing; c-int8 is built from the ONNX file as from the zoo agent."""
    store = ("--store", tmp_path / "q.sqlite", "--max-episodes", "20")
    sac = ("--algo", "sac", "--env", "Pendulum-v1", "--folder", zoo)
    assert cli("export", *sac, "--backend", "ort-fp32", "--out", tmp_path / "sac", *store)[0] == 0
    onnx = ("--model", tmp_path / "sac" / "policy.onnx", "--env", "Pendulum-v1")
    code, _, err = cli("export", *onnx, "--backend", "ort-fp32", "--out", tmp_path / "again", *store)
    assert code == 0, err
    action = json.loads((tmp_path / "again" / "policy.json").read_text())["action"]
    assert action["space"] == "Box" and action["low"] == [-2.0] and action["high"] == [2.0]
    code, _, err = cli("export", *onnx, "--backend", "ort-int8-static", "--out", tmp_path / "static", *store)
    assert code == 0, err
    document = json.loads((tmp_path / "static" / "policy.json").read_text())
    assert document["parity"]["passed"] and document["parity"]["max_error_steps_outside_sensitive"] <= 4
    assert document["claimed_spec"]["obs_bits"] == "fp32" and document["claimed_spec"]["act_bits"] == "int8"
    assert cli("export", *sac, "--backend", "ort-int8-static", "--out", tmp_path / "zoo-static", *store)[0] == 0
    zoo_document = json.loads((tmp_path / "zoo-static" / "policy.json").read_text())
    # the same graph, calibrated on the same states (the observations pass through float32 on two paths)
    ratio = "observation_span_ratio"
    assert zoo_document["parity"].pop(ratio) == pytest.approx(document["parity"].pop(ratio), rel=1e-6)
    assert zoo_document["parity"] == document["parity"]
    code, _, err = cli("export", *onnx, "--backend", "ort-int8-dynamic", "--out", tmp_path / "dynamic", *store)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "parity gate failed" in err and "per tensor" in err and "differ 7x" in err and "c-int8" in err
    assert not (tmp_path / "dynamic").exists()
    code, _, err = cli("export", *onnx, "--backend", "c-int8", "--out", tmp_path / "c8", *store)
    assert code == 0, err
    assert json.loads((tmp_path / "c8" / "policy.json").read_text())["parity"]["max_error_steps"] < 0.01


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--backend", "tensorrt"), ("'tensorrt'", "ort-int8-static")),
        (("--calibration-states", "0"), ("'0'", "positive integer")),
    ],
)
def test_bad_deploy_input(cli, zoo: Path, tmp_path: Path, args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    store = tmp_path / "quarl.sqlite"
    with ResultStore(store) as created:
        created.to_dataframe()  # creates the file
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    code, _, err = cli("deploy", "--algo", "ppo", "--env", "CartPole", "--folder", zoo, "--store", store, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and all(f in err for f in fragments)
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before


@pytest.mark.slow
def test_export_certifies_the_artifact_s_success_under_each_condition_of_a_suite(
    cli, zoo: Path, tmp_path: Path
) -> None:
    """ppo CartPole's int8 artifact keeps every episode's balance under both action-noise severities: policy.json
    and the README name the outcome, the suite and each condition's two verdicts; a bad condition is one line
    before anything is built."""
    out, store = tmp_path / "artifact", ("--store", tmp_path / "q.sqlite")
    agent = ("--algo", "ppo", "--env", "CartPole", "--folder", zoo, "--backend", "ort-int8-static")
    success = ("--outcome", "success", "--success", "truncated", "--tolerance-abs", "0.1")
    code, out_text, err = cli("export", *agent, *success, "--perturb", "action-noise=0.05/0.2", "--out", out, *store)
    assert code == 0, err
    certification = json.loads((out / "policy.json").read_text())["certification"]
    assert certification["outcome"] == "success (ran to its time limit)"
    assert certification["suite"] == "action-noise=0.05/0.2"
    verdicts = [(c["condition"], c["against_fp32"]["verdict"]) for c in certification["conditions"]]
    assert verdicts == [("action-noise=0.05", "safe"), ("action-noise=0.2", "safe")]
    assert certification["against_fp32"] == certification["conditions"][0]["against_fp32"]
    assert "against the fp32 policy under action-noise=0.2: safe" in (out / "README.md").read_text()
    with ResultStore(tmp_path / "q.sqlite") as opened:
        assert set(opened.to_dataframe()["perturbation"]) == {"action-noise=0.05", "action-noise=0.2"}
    code, _, err = cli("export", *agent, "--perturb", "masspole=2", "--out", tmp_path / "bad", *store)
    assert code == 2 and "bad severity 2 for masspole" in err and not (tmp_path / "bad").exists()


def test_export_to_an_unwritable_place(cli, zoo: Path, tmp_path: Path) -> None:
    code, _, err = cli(
        "export",
        "--algo",
        "ppo",
        "--env",
        "CartPole",
        "--folder",
        zoo,
        "--backend",
        "ort-fp32",
        "--out",
        tmp_path / "missing" / "artifact",
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot write" in err
    assert not (tmp_path / "missing").exists()


def test_a_backend_that_cannot_run_says_why_and_the_others_run(cli, zoo: Path, tmp_path: Path, monkeypatch) -> None:
    from quarl_bench.deploy import backends

    real_build = backends.build

    def build_without_torchao(backend, *args, **kwargs):
        if backend == "torchao-int8":
            raise backends.QuarlError("backend torchao-int8 unavailable: No module named 'torchao'")
        return real_build(backend, *args, **kwargs)

    monkeypatch.setattr(backends, "build", build_without_torchao)
    store = tmp_path / "quarl.sqlite"
    code, out, err = cli(
        "deploy",
        "--algo",
        "dqn",
        "--env",
        "CartPole",
        "--folder",
        zoo,
        "-n",
        "5",
        "--store",
        store,
        "--backend",
        "torchao-int8",
        "ort-fp16",
    )
    assert code == 0, err
    assert "torchao-int8 cannot run here: QuarlError: backend torchao-int8 unavailable" in " ".join(out.split())
    assert sorted(load_results(store)["backend"]) == ["ort-fp16", "torch-fp32"]


def toy_build(name, module, sample, calibration, calibration_method, network_states):
    from quarl_bench.deploy.backends import Artifact

    return Artifact("toy-fp16", "onnx", b"toy", meta=(("module", module), ("sample", sample)))


def test_a_backend_is_one_registration(monkeypatch) -> None:
    """What a target module does (``deploy/targets/``): one Backend, and specs, parity claims, the requirement check
    and the build dispatch take it by name."""
    from quarl_bench.deploy import targets as registry
    from quarl_bench.deploy.parity import claimed_spec

    monkeypatch.setattr(registry.BACKENDS, "entries", dict(registry.BACKENDS.entries))
    toy = registry.Backend("toy-fp16", "fp16", "onnx", "deploy", (), f"{__name__}:toy_build", {"precision": "fp16"})
    registry.register_backend(toy)
    target = deploy_target("toy-fp16")
    assert target.spec == QuantSpec("fp16") and claimed_spec("toy-fp16") == QuantSpec("fp16")
    form = SimpleNamespace(torch_layers=True, carries_state=False)  # what a deployable form says of itself
    artifact = build("toy-fp16", form, np.zeros((1, 4), np.float32))
    assert artifact.data == b"toy" and artifact.info("module") is form
    with pytest.raises(QuarlError, match="bad backend 'toy-int3': expected one of torch-fp32, .*toy-fp16"):
        deploy_target("toy-int3")


def test_an_artifact_is_its_bytes_and_its_certificate_names_them(cli, zoo: Path, tmp_path: Path, monkeypatch) -> None:
    """Two exports of one policy give the same bytes and the second reuses the first's closed-loop verdicts; an
    artifact with other bytes (a build that is not deterministic) is measured again, never given their certificate."""
    from quarl_bench.deploy.backends import Artifact
    from quarl_bench.methods import deploy

    agent = ("--algo", "dqn", "--env", "CartPole-v1", "--folder", zoo, "--max-episodes", "20")
    store = ("--store", tmp_path / "q.sqlite")
    outs = [tmp_path / name for name in ("one", "two", "other")]
    code, first, err = cli("export", *agent, "--backend", "ort-fp32", "--out", outs[0], *store)
    assert code == 0, err
    code, second, err = cli("export", *agent, "--backend", "ort-fp32", "--out", outs[1], *store)
    assert code == 0, err
    documents = [json.loads((out / "policy.json").read_text()) for out in outs[:2]]
    assert documents[0]["files"] == documents[1]["files"]  # deterministic: the same files, byte for byte
    certified = documents[0]["certification"]["artifact_sha256"]
    assert certified == hashlib.sha256((outs[0] / "policy.onnx").read_bytes()).hexdigest()
    assert "found stored" in second and "found stored" not in first
    deploy._artifacts.clear()
    monkeypatch.setattr(Artifact, "sha256", property(lambda self: "f" * 64))  # as if the build gave other bytes
    code, third, err = cli("export", *agent, "--backend", "ort-fp32", "--out", outs[2], *store)
    assert code == 0, err
    assert "found stored" not in third  # measured again on its own bytes
    assert json.loads((outs[2] / "policy.json").read_text())["certification"]["artifact_sha256"] == "f" * 64
