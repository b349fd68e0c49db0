"""rl-zoo3's sb3-contrib algorithms beyond QR-DQN and TQC: TRPO, ARS and CrossQ. Each is one entry of the algorithm
table; a zip says which algorithm saved it, PTQ reaches its acting layers, and ARS's linear policy (no hidden
layer) reaches c-int8 with its firmware check passing. CrossQ's batch renormalisation is folded into the Linear
after it, so PTQ and c-int8 quantize the folded weights. The agents
are trained here for a few seconds: what is checked is the plumbing, not their scores."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from quarl_bench.store.results import load_results


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sb3_contrib import ARS, TRPO, CrossQ

    folder = tmp_path_factory.mktemp("contrib")
    TRPO("MlpPolicy", "CartPole-v1", n_steps=256, seed=0, device="cpu").learn(1024).save(folder / "trpo.zip")
    ARS("LinearPolicy", "CartPole-v1", seed=0, device="cpu").learn(2000).save(folder / "ars.zip")
    crossq = CrossQ(
        "MlpPolicy", "Pendulum-v1", learning_starts=50, seed=0, device="cpu", policy_kwargs={"net_arch": [16]}
    )
    crossq.learn(100).save(folder / "crossq.zip")
    return folder


@pytest.mark.parametrize(("name", "env"), [("trpo", "CartPole-v1"), ("ars", "CartPole-v1"), ("crossq", "Pendulum-v1")])
def test_a_contrib_zip_is_read_and_quantized(cli, agents: Path, tmp_path: Path, name: str, env: str) -> None:
    store = tmp_path / "q.sqlite"
    code, out, err = cli(
        "run", "--model", agents / f"{name}.zip", "--env", env, "--bits", "32", "8", "-n", "3", "--store", store
    )
    assert code == 0, err
    rows = load_results(store).set_index("precision")
    assert set(rows["algo"]) == {name}  # read from the zip's saved policy class and data
    layers = rows.loc["int8", "layers"]
    assert layers and all(layer["name"].split(".")[0] in ("action_net", "mlp_extractor", "actor") for layer in layers)
    if name == "crossq":  # its batch renormalisation is folded into the Linear layers after it, then quantized
        assert "BatchRenorm" not in out and len(layers) == 3  # latent 16, mu, log_std's Linear is not acting


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None, reason="needs make and a C compiler")
def test_ars_s_linear_policy_reaches_c_int8_and_its_check_passes(cli, agents: Path, tmp_path: Path) -> None:
    out = tmp_path / "ars-c"
    agent = ("--model", agents / "ars.zip", "--env", "CartPole-v1", "--store", tmp_path / "q.sqlite")
    code, _, err = cli(
        "export", *agent, "--backend", "c-int8", "--out", out, "--max-episodes", "20", "--allow-degraded"
    )
    assert code == 0, err
    assert "HIDDEN" not in (out / "policy.c").read_text() and "static void hidden" not in (out / "policy.c").read_text()
    checked = subprocess.run(["make", "-s", "check"], cwd=out, capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and " 0 mismatches" in checked.stdout, checked.stderr


def test_folding_crossq_s_batch_renormalisation_keeps_its_actions(agents: Path) -> None:
    """Folded (each BatchRenorm into the Linear after it, the last into mu and log_std), the actor computes the same
    actions, with no normalisation layer left."""
    import numpy as np
    import torch
    from sb3_contrib import CrossQ

    from quarl_bench.quant.fold import fold_actor_batch_norms, is_batch_norm
    from quarl_bench.quant.quantize import clone_policy

    policy = CrossQ.load(agents / "crossq.zip", device="cpu").policy
    policy.set_training_mode(False)
    with torch.no_grad():  # running statistics away from (0, 1), so the fold has something to do
        for module in policy.actor.latent_pi:
            if is_batch_norm(module):
                module.ra_mean.uniform_(-0.5, 0.5)
                module.ra_var.uniform_(0.5, 2.0)
    folded = clone_policy(policy)
    assert fold_actor_batch_norms(folded) and not any(is_batch_norm(m) for m in folded.actor.modules())
    states = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    expected = policy.predict(states, deterministic=True)[0]
    assert np.allclose(folded.predict(states, deterministic=True)[0], expected, atol=1e-5)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_crossq_reaches_c_int8_with_its_batch_norm_folded(cli, agents: Path, tmp_path: Path) -> None:
    import json

    out = tmp_path / "crossq-c"
    agent = ("--model", agents / "crossq.zip", "--env", "Pendulum-v1", "--store", tmp_path / "q.sqlite")
    code, _, err = cli(
        "export",
        *agent,
        "--backend",
        "c-int8",
        "--out",
        out,
        "--max-episodes",
        "20",
        "--allow-degraded",
        "--tolerance-abs",
        "200",
        "--catastrophe",
        "1000",  # a CrossQ of 100 steps does not beat a random policy: no default threshold
    )
    assert code == 0, err
    assert json.loads((out / "policy.json").read_text())["parity"]["passed"]
