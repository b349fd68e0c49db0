"""Recurrent PPO (rl-zoo3's ``ppo_lstm``): evaluation carries the LSTM state as sb3-contrib does, PTQ reaches the
LSTM's gates, ``--state-bits`` rounds the state every step, fidelity is measured per step of the episode, distill
unrolls the student, and the ONNX export takes and returns the state. The agent is trained here in seconds on
CartPoleNoVel-v1 (velocities hidden): what is checked is the plumbing, not its score."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from quarl_bench.store.results import load_results
from tests.test_edge import client_of

ENV = "CartPoleNoVel-v1"


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import rl_zoo3.import_envs  # noqa: F401  (registers CartPoleNoVel-v1)
    from sb3_contrib import RecurrentPPO
    from stable_baselines3 import PPO

    folder = tmp_path_factory.mktemp("recurrent")
    kwargs = {"lstm_hidden_size": 16, "net_arch": {"pi": [16], "vf": [16]}}
    model = RecurrentPPO("MlpLstmPolicy", ENV, n_steps=32, batch_size=64, seed=0, device="cpu", policy_kwargs=kwargs)
    model.learn(512).save(folder / "lstm.zip")
    memory_policy(kwargs).save(folder / "memory.zip")
    PPO("MlpPolicy", "CartPole-v1", n_steps=64, seed=0, device="cpu").learn(64).save(folder / "ppo.zip")
    return folder


def memory_policy(kwargs: dict):
    """A RecurrentPPO whose actions need its memory (the tiny trained one plays one action throughout): its cell
    integrates the pole angle (input, forget and output gates held open) and it pushes the way the sum leans, so
    from a zero state it acts otherwise on about a third of the steps."""
    from sb3_contrib import RecurrentPPO

    model = RecurrentPPO("MlpLstmPolicy", ENV, seed=0, device="cpu", policy_kwargs=kwargs | {"net_arch": {"pi": []}})
    lstm, head, hidden = model.policy.lstm_actor, model.policy.action_net, 16
    with torch.no_grad():
        for parameter in (*lstm.parameters(), *head.parameters()):
            parameter.zero_()
        for gate in (0, 1, 3):  # input, forget, output
            lstm.bias_ih_l0[gate * hidden : (gate + 1) * hidden] = 10.0
        lstm.weight_ih_l0[2 * hidden, 2] = 20.0  # the first unit's cell input: the pole angle
        head.weight[1, 0], head.weight[0, 0] = 1.0, -1.0
    return model


def loaded(agents: Path):
    from quarl_bench.zoo.forms import load_agent
    from quarl_bench.zoo.model_file import model_ref

    return load_agent(model_ref(agents / "lstm.zip", ENV))


def test_evaluation_plays_sb3_contrib_s_episodes_carrying_the_state(agents: Path) -> None:
    from stable_baselines3.common.evaluation import evaluate_policy

    from quarl_bench.evaluation.episode_seeds import seed_every_episode
    from quarl_bench.evaluation.evaluate import evaluate

    agent = loaded(agents)
    assert agent.ref.algo == "ppo_lstm"  # read from the zip's policy class
    ours = evaluate(agent.model.policy, agent.make_env(3, seed=4), 7, seed=4)
    theirs = agent.make_env(3, seed=4)
    seed_every_episode(theirs, 4, range(3))  # sb3-contrib's loop (the model's predict carries the state)
    rewards, lengths = evaluate_policy(agent.model, theirs, 7, return_episode_rewards=True)
    assert (ours.rewards, ours.lengths) == (list(rewards), list(lengths))


def test_markov_states_replay_the_decisions_taken_along_an_episode(agents: Path) -> None:
    from quarl_bench.evaluation.margins import decision_values
    from quarl_bench.families.recurrent import distribution_step, pack, started, zero_state

    policy = loaded(agents).model.policy
    env = loaded(agents).make_env(2, seed=0)
    obs, state, starts = env.reset(), zero_state(policy, 2), np.ones(2, dtype=bool)
    rows, logits = [], []
    for _ in range(60):
        rows.append(pack(obs, started(state, starts)))
        distribution, state = distribution_step(policy, obs, state, starts)
        logits.append(distribution.distribution.logits.numpy())
        obs, _, dones, _ = env.step(distribution.distribution.probs.argmax(dim=1).numpy())
        starts = np.asarray(dones, dtype=bool)
    markov = np.concatenate(rows)
    assert np.allclose(decision_values(policy, markov), np.concatenate(logits), atol=1e-6)
    forgetful = decision_values(policy, markov * np.r_[np.ones(4), np.zeros(32)])  # the same observations, no memory
    assert not np.allclose(forgetful, np.concatenate(logits), atol=1e-3)  # so the rows carry the state


def test_int4_reaches_the_lstm_gates_one_grid_per_gate(agents: Path) -> None:
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.types import QuantSpec

    policy = loaded(agents).model.policy
    quantized, layers = quantize(policy, QuantSpec("int4", granularity="per-tensor", symmetric=True))
    names = [layer.name for layer in layers]
    assert names[:2] == ["lstm_actor.weight_ih_l0", "lstm_actor.weight_hh_l0"] and "lstm_critic" not in str(names)
    weight = quantized.lstm_actor.weight_hh_l0.detach()
    assert all(len(torch.unique(gate)) <= 15 for gate in weight.chunk(4))  # each gate on its own 4-bit grid
    assert len(torch.unique(weight)) > 15  # four grids, not one
    per_row, _ = quantize(policy, QuantSpec("int4", granularity="per-channel", symmetric=True))
    rows = per_row.lstm_actor.weight_ih_l0.detach()
    assert all(len(torch.unique(row)) <= 15 for row in rows) and len(torch.unique(rows)) > 15
    assert torch.equal(quantized.lstm_critic.weight_hh_l0, policy.lstm_critic.weight_hh_l0)  # the critic's stays


def test_state_bits_rounds_hidden_and_cell_state_after_every_step(agents: Path) -> None:
    from quarl_bench.evaluation.calibration import visited_states
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.types import QuantSpec

    agent = loaded(agents)
    states = visited_states(agent.model.policy, agent.make_env, 200)
    assert states.shape[1] == 4 + 2 * 16  # Markov states: observation (velocities masked to 0), h, c
    quantized, _ = quantize(agent.model.policy, QuantSpec("fp32", state_bits="int4"), states)
    env = agent.make_env(2, seed=1)
    obs, state, starts = env.reset(), None, np.ones(2, dtype=bool)
    hidden, cell = set(), set()
    for _ in range(50):
        _, state = quantized.predict(obs, state, starts, deterministic=True)
        hidden |= set(np.round(state[0].ravel(), 6)) - {0.0}
        cell |= set(np.round(state[1].ravel(), 6)) - {0.0}
        obs, _, dones, _ = env.step(quantized.predict(obs, state, np.zeros(2, bool), deterministic=True)[0])
        starts = np.asarray(dones, dtype=bool)
    assert 2 < len(hidden) <= 16 and 2 < len(cell) <= 16  # 16 levels each (zero: the start's state, off-grid)


def test_state_bits_and_stateless_backends_are_refused_in_one_line(cli, agents: Path, tmp_path: Path) -> None:
    store = tmp_path / "q.sqlite"
    code, _, err = cli(
        "run", "--model", agents / "ppo.zip", "--env", "CartPole-v1", "--state-bits", "8", "--store", store
    )
    assert code == 2 and "--state-bits int8" in err and "carries no recurrent state" in err
    assert len(err.strip().splitlines()) == 1 and not store.exists()
    out = tmp_path / "c"
    code, _, err = cli("export", "--model", agents / "lstm.zip", "--env", ENV, "--backend", "c-int8", "--out", out)
    assert code == 2 and "cannot carry a recurrent policy's LSTM state" in err and "ort-fp32" in err
    assert not out.exists()
    code, _, err = cli("sensitivity", "--model", agents / "lstm.zip", "--env", ENV, "--bits", "4", "--store", store)
    assert code == 2 and "LSTM is not one of the acting layers" in err and not store.exists()


def test_fidelity_over_time_stores_per_step_errors_and_hidden_state_error(cli, agents: Path, tmp_path: Path) -> None:
    store = tmp_path / "q.sqlite"
    agent = ("--model", agents / "lstm.zip", "--env", ENV, "--store", store)
    for flags in (("--bits", "32", "4"), ("--bits", "4", "--state-bits", "4")):
        code, _, err = cli("fidelity", *agent, *flags, "-n", "3")
        assert code == 0, err
    rows = sqlite3.connect(store).execute("SELECT over_time, lengths FROM fidelity").fetchall()
    found = {json.loads(over)["label"]: (json.loads(over), json.loads(lengths)) for over, lengths in rows}
    assert set(found) == {"fp32", "int4", "int4 h4 cal-minmax1000"}
    identical, lengths = found["fp32"]
    assert len(identical["alive"]) == max(lengths) and identical["alive"][0] == 3
    assert not any(identical["flips"]) and not any(identical["hidden_error"])  # fp32 against itself
    assert all(sum(found[label][0]["hidden_error"]) > 0 for label in ("int4", "int4 h4 cal-minmax1000"))
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report")  # a store of fidelity rows alone
    assert code == 0, err
    assert (tmp_path / "report" / "fidelity_over_time_ppo_lstm_CartPoleNoVel-v1.svg").exists()


def test_distill_unrolls_the_recurrent_student(cli, agents: Path, tmp_path: Path) -> None:
    from sb3_contrib import RecurrentPPO

    out = tmp_path / "hard.zip"
    agent = ("--model", agents / "lstm.zip", "--env", ENV, "--store", tmp_path / "q.sqlite")
    settings = ("--setting", "distill.rounds=1", "distill.epochs=2")
    code, _, err = cli("harden", *agent, "--bits", "4", "--budget", "256", "--out", out, *settings)
    assert code == 0, err
    parent, hardened = (RecurrentPPO.load(path, device="cpu").policy for path in (agents / "lstm.zip", out))
    assert not torch.equal(parent.lstm_actor.weight_hh_l0, hardened.lstm_actor.weight_hh_l0)  # BPTT reached it
    assert torch.equal(parent.lstm_critic.weight_hh_l0, hardened.lstm_critic.weight_hh_l0)


def test_onnx_export_takes_and_returns_the_state_and_its_client_plays_as_torch(
    cli, agents: Path, tmp_path: Path
) -> None:
    import gymnasium as gym

    out = tmp_path / "onnx"
    agent = ("--model", agents / "memory.zip", "--env", ENV, "--store", tmp_path / "q.sqlite")
    # a hand-built policy no better than random play: so a tolerance in reward units and a catastrophe threshold
    gate = ("--max-episodes", "20", "--allow-degraded", "--catastrophe", "50", "--tolerance-abs", "5")
    code, _, err = cli("export", *agent, "--backend", "ort-fp32", "--out", out, *gate)
    assert code == 0, err
    contract = json.loads((out / "policy.json").read_text())
    assert contract["state"]["inputs"] == ["h", "c"] and contract["state"]["hidden"] == 16
    assert contract["parity"]["passed"]
    # the machine and runtime its gate was measured with, and no vectors (they would need the state)
    assert contract["check"]["machine"]["int8_features"] is not None and "onnxruntime" in contract["check"]["runtime"]
    assert not (out / "check.py").exists()
    done = subprocess.run([sys.executable, "-c", client_of(out)], cwd=out, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    played = float(done.stdout.split()[-1])
    from sb3_contrib import RecurrentPPO

    policy = RecurrentPPO.load(agents / "memory.zip", device="cpu").policy  # the same episode, torch with its state
    env = gym.make(ENV)
    obs, _ = env.reset(seed=0)
    total, finished, state, start = 0.0, False, None, np.ones(1, dtype=bool)
    while not finished:
        action, state = policy.predict(obs[None], state, start, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(int(action[0]))
        total, finished, start = total + float(reward), terminated or truncated, np.zeros(1, dtype=bool)
    assert played == pytest.approx(total)
    rows = load_results(tmp_path / "q.sqlite")
    assert set(rows["algo"]) == {"ppo_lstm"}
    played = rows[(rows["method"] == "deploy") & (rows["backend"] == "ort-fp32")]
    assert len(played) and (played["action_agreement"] == 1.0).all()  # fp32 torch carried its state beside it


def test_a_zip_of_an_algorithm_outside_the_table_is_refused_listing_the_accepted(cli, tmp_path: Path) -> None:
    import zipfile

    model = tmp_path / "her_like.zip"
    with zipfile.ZipFile(model, "w") as archive:
        archive.writestr("data", json.dumps({"policy_class": {"__module__": "my_pkg.policies"}}))
    store = tmp_path / "q.sqlite"
    code, _, err = cli("run", "--model", model, "--env", "CartPole-v1", "--store", store)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "'my_pkg.policies'" in err and "ppo_lstm" in err and "crossq" in err and not store.exists()
