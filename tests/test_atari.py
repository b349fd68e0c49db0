"""The Atari path: a tiny CNN agent made here, saved in the zoo layout, run at 8 bits through the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ATARI_ENV as ENV_ID
from conftest import tiny_atari_agent
from stable_baselines3 import PPO

from quarl_bench.store.results import load_results

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_atari_zoo(zoo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO CnnPolicy trained for a few steps."""
    return tiny_atari_agent(
        zoo,
        tmp_path_factory.mktemp("atari_zoo"),
        "ppo",
        lambda env: PPO("CnnPolicy", env, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu"),
    )


def test_tiny_cnn_agent_at_8_bits(cli, tiny_atari_zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = ("run", "--algo", "ppo", "--env", "Breakout", "--bits", "8", "-n", "2", "--n-envs", "2")
    code, out, err = cli(*args, "--folder", tiny_atari_zoo, "--no-hub", "--store", store)
    assert code == 0, err
    frame = load_results(store).set_index("precision")
    int8 = frame.loc["int8"]
    assert int8["env_id"] == ENV_ID and int8["deterministic"] == 0  # rl-zoo3 plays Atari stochastically
    layers = {layer["name"]: layer for layer in int8["layers"]}
    convs = [name for name in layers if name.startswith("features_extractor.cnn.")]
    assert len(convs) == 3  # NatureCNN's three convolutions, per output channel
    assert {"features_extractor.linear.0.weight", "action_net.weight"} <= set(layers)
    assert "value_net.weight" not in layers
    # A full game of five lives (~500 steps for this agent), not one life (~100): the Monitor sits under the
    # AtariWrapper, whose life-loss "done" only resets the wrapper.
    assert all(length > 250 for length in int8["episode_lengths"])


@pytest.fixture(scope="module")
def tiny_dqn_atari_zoo(zoo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DQN CnnPolicy trained for a few steps, saved with exploration rate 0.2."""
    from stable_baselines3 import DQN

    return tiny_atari_agent(
        zoo,
        tmp_path_factory.mktemp("dqn_atari_zoo"),
        "dqn",
        lambda env: DQN(
            "CnnPolicy", env, buffer_size=64, learning_starts=0, exploration_final_eps=0.2, seed=0, device="cpu"
        ),
    )


def test_dqn_plays_atari_epsilon_greedy_like_rl_zoo3_and_repeats_with_its_seed(
    cli, tiny_dqn_atari_zoo: Path, tmp_path: Path
) -> None:
    args = ("run", "--algo", "dqn", "--env", "Breakout", "--bits", "8", "-n", "2", "--n-envs", "2", "--no-hub")
    stores = [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    for store in stores:
        code, out, err = cli(*args, "--folder", tiny_dqn_atari_zoo, "--store", store)
        assert code == 0, err
    assert "epsilon-greedy(0.2)" in out
    first, second = (load_results(store).set_index("precision") for store in stores)
    for precision in ("fp32", "int8"):
        row = first.loc[precision]
        assert row["action_mode"] == "epsilon-greedy" and row["epsilon"] == pytest.approx(0.2)
        assert row["episode_rewards"] == second.loc[precision, "episode_rewards"]
        assert row["episode_lengths"] == second.loc[precision, "episode_lengths"]


def readme_score(zoo: Path, agent: str) -> tuple[float, float, int]:
    """(mean, std, games) of ``agent``'s score as the zoo's README states it: "**142.7 ± 90.4** over 30 full games"."""
    text = (zoo / "README.md").read_text()
    section = text[text.index(f"`{agent}`") :]
    found = re.search(r"\*\*([\d.]+) ± ([\d.]+)\*\* over (\d+) full games", section)
    assert found, f"the zoo README states no score for {agent}"
    return float(found[1]), float(found[2]), int(found[3])


def test_shared_zoo_ppo_breakout_agent_scores_as_its_readme_says(cli, zoo: Path, tmp_path: Path) -> None:
    """The one real Atari agent in the shared zoo, against the score its README gives (stochastic actions)."""
    mean, std, _ = readme_score(zoo, "ppo/BreakoutNoFrameskip-v4_1")
    games = 8
    store = tmp_path / "quarl.sqlite"
    args = ("run", "--algo", "ppo", "--env", "Breakout", "--bits", "32", "-n", games, "--no-hub")
    code, out, err = cli(*args, "--folder", zoo, "--store", store)
    assert code == 0, err
    row = load_results(store).iloc[0]
    assert row["action_mode"] == "sampled" and row["episodes"] == games
    # Three standard errors of the README's mean for this many games: the test fails at well under 1% when the
    # agent plays as its README says, and a broken load (a random policy scores ~1.7) lands far below the band.
    margin = 3 * std / games**0.5
    assert mean - margin < row["mean_reward"] < mean + margin
