"""End to end through the CLI on real zoo agents: rewards, stored rows, re-runs are no-ops."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from quarl_bench.store.results import load_results

pytestmark = pytest.mark.slow


def test_ppo_cartpole_fp32_and_int8_reach_500(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    code, out, err = cli(
        "run", "--algo", "ppo", "--env", "CartPole-v1", "--bits", "8", "--folder", zoo, "--store", store
    )
    assert code == 0, err
    assert "ppo/CartPole-v1 #" in out and "(folder)" in out
    frame = load_results(store).set_index("precision")
    assert sorted(frame.index) == ["fp32", "int8"]
    for precision in ("fp32", "int8"):
        row = frame.loc[precision]
        assert row["episodes"] == 100 and len(row["episode_rewards"]) == 100
        assert row["mean_reward"] == 500.0
    int8 = frame.loc["int8"]
    assert int8["fp32_reward"] == 500.0 and int8["E %"] == 0.0
    assert int8["action_agreement"] > 0.9
    assert {layer["name"] for layer in int8["layers"]} == {
        "mlp_extractor.policy_net.0.weight",
        "mlp_extractor.policy_net.2.weight",
        "action_net.weight",
    }
    assert all(layer["kl_div"] >= 0 and layer["step"] > 0 for layer in int8["layers"])
    assert int8["provenance"]["versions"]["stable-baselines3"]

    # Re-running the same job is a no-op: same rows, nothing re-evaluated.
    created = sorted(load_results(store)["created_at"])
    code, out, _ = cli("run", "--algo", "ppo", "--env", "CartPole", "--bits", "8", "--folder", zoo, "--store", store)
    assert code == 0 and out.count("reused from the store") == 2
    assert sorted(load_results(store)["created_at"]) == created


AGENTS = [
    # algo, env as a user types it, episodes, lowest acceptable fp32 mean reward
    ("dqn", "CartPole-v1", 20, 450.0),
    ("a2c", "Acrobot-v1", 20, -100.0),
    ("ppo", "LunarLander-v2", 20, 150.0),  # Box2D; a -v2 agent run on -v3
    ("ppo", "ReacherBulletEnv-v0", 10, 10.0),  # PyBullet with VecNormalize and TimeFeatureWrapper
    ("sac", "Pendulum", 10, -250.0),
]


@pytest.mark.parametrize(("algo", "env", "episodes", "floor"), AGENTS, ids=[f"{a}-{e}" for a, e, *_ in AGENTS])
def test_zoo_agents_fp32_and_int8(
    cli, zoo: Path, tmp_path: Path, algo: str, env: str, episodes: int, floor: float
) -> None:
    store = tmp_path / "quarl.sqlite"
    args = ("run", "--algo", algo, "--env", env, "--bits", "8", "-n", episodes, "--folder", zoo, "--store", store)
    code, out, err = cli(*args)
    assert code == 0, err
    frame = load_results(store).set_index("precision")
    assert len(frame) == 2
    assert frame.loc["fp32", "mean_reward"] >= floor
    assert all(len(frame.loc[p, "episode_rewards"]) == episodes for p in ("fp32", "int8"))
    assert frame.loc["int8", "layers"]
    if env.endswith("-v2"):
        assert "runs on LunarLander-v3" in out


def test_same_seed_same_episodes(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    base = (
        "run",
        "--algo",
        "a2c",
        "--env",
        "Acrobot-v1",
        "--bits",
        "32",
        "-n",
        "10",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert cli(*base)[0] == 0
    first = load_results(store).iloc[0]["episode_rewards"]
    assert cli(*base, "--force")[0] == 0
    frame = load_results(store)
    assert len(frame) == 1 and frame.iloc[0]["episode_rewards"] == first
    assert cli(*base[:-2], "--seed", "7", "--store", store)[0] == 0
    assert len(load_results(store)) == 2


def test_console_script_and_results_export(zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    exe = Path(sys.executable).with_name("quarl-bench")
    run = [
        exe,
        "run",
        "--algo",
        "dqn",
        "--env",
        "CartPole",
        "--bits",
        "4",
        "fp16",
        "-n",
        "5",
        "--folder",
        zoo,
        "--store",
        store,
    ]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "int4" in done.stdout and "fp16" in done.stdout
    assert "argv[0]=" not in done.stdout + done.stderr and "Warning" not in done.stderr
    csv = tmp_path / "out.csv"
    done = subprocess.run([exe, "results", "--store", store, "--csv", csv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "3 results" in done.stdout
    exported = pd.read_csv(csv).set_index("precision")
    stored = load_results(store).set_index("precision")
    assert sorted(exported.index) == ["fp16", "fp32", "int4"]
    for precision in ("fp16", "int4"):  # E% exported as stored, from the fp32 row
        assert exported.loc[precision, "E %"] == pytest.approx(stored.loc[precision, "E %"])
        assert exported.loc[precision, "fp32_reward"] == stored.loc["fp32", "mean_reward"]
    row = stored.loc["int4"]  # provenance: the command the user typed, the code, the versions
    assert row["provenance"]["command"].startswith("quarl-bench run --algo dqn --env CartPole --bits 4 fp16")
    assert len(row["provenance"]["git_commit"]) == 40 and isinstance(row["provenance"]["git_dirty"], bool)
    assert row["provenance"]["versions"]["torch"].startswith("2.")
    with sqlite3.connect(store) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_fields_that_do_not_apply_are_normalised_so_fp32_runs_once(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = ("run", "--algo", "ppo", "--env", "CartPole", "-n", "5", "--folder", zoo, "--store", store)
    assert cli(*args, "--bits", "32", "8")[0] == 0
    code, out, _ = cli(*args, "--bits", "32", "8", "fp16", "--granularity", "per-channel", "--symmetric")
    assert code == 0 and out.count("reused from the store") == 1  # fp32: the same computation, the same row
    frame = load_results(store)
    assert sorted(frame["precision"]) == ["fp16", "fp32", "int8", "int8"]
    fp16 = frame[frame["precision"] == "fp16"].iloc[0]
    assert (fp16["granularity"], fp16["symmetric"]) == ("auto", 0)  # normalised: fp16 has no grid
    assert set(frame["quantizer_version"]) == {3}


def test_train_then_run_from_the_cache(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUARL_ZOO", raising=False)
    cache, store = tmp_path / "agents", tmp_path / "quarl.sqlite"
    code, out, err = cli("train", "--algo", "ppo", "--env", "CartPole", "--n-timesteps", "2048", "--cache", cache)
    assert code == 0, err
    assert (cache / "ppo" / "CartPole-v1_1" / "CartPole-v1.zip").is_file()
    assert (cache / "ppo" / "CartPole-v1_1" / "CartPole-v1" / "config.yml").is_file()
    code, out, err = cli(
        "run", "--algo", "ppo", "--env", "CartPole", "-n", "5", "--cache", cache, "--no-hub", "--store", store
    )
    assert code == 0, err
    assert "(cache)" in out
    assert load_results(store).iloc[0]["agent_source"] == "cache"


def test_library_noise_never_reaches_the_console(zoo: Path, tmp_path: Path) -> None:
    """pybullet prints 'pybullet build time' and 'argv[0]=' from C; deprecation warnings come from several libraries."""
    exe, store = Path(sys.executable).with_name("quarl-bench"), tmp_path / "quarl.sqlite"
    grid = tmp_path / "bullet.yaml"
    grid.write_text(
        "episodes: 2\ngrid:\n  - algos: [ppo, a2c]\n    envs: [ReacherBulletEnv-v0]\n    precisions: [fp32, 8]\n"
    )
    commands = [
        [exe, "run", "--algo", "ppo", "--env", "ReacherBulletEnv-v0", "-n", "2", "--folder", zoo, "--no-hub"],
        [exe, "sweep", grid, "--workers", "2", "--folder", zoo],
    ]
    for command in commands:
        done = subprocess.run([*command, "--store", store], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stderr == "" and "pybullet" not in done.stdout and "argv[0]" not in done.stdout
    assert len(load_results(store)) == 4


def test_help_loads_neither_torch_nor_gymnasium_nor_ray() -> None:
    probe = (
        "import sys\nfrom quarl_bench.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'gymnasium', 'ray', 'stable_baselines3') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("[]") and "quarl-bench" in done.stdout
