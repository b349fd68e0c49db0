"""``quarl-bench train`` checkpoints as it goes and resumes an interrupted run; it takes an rl-zoo3 hyperparameter
file and overrides, as rl-zoo3 does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from quarl_bench.zoo.agents import find_in_folder
from quarl_bench.zoo.train import checkpoints, latest_checkpoint, run_folders


def hear_ctrl_c() -> None:
    """Ctrl-C stops the trainer even where the suite runs as a shell's background job (which ignores SIGINT, and
    its children inherit that: the training then ran to its end and exited 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_training_keeps_its_checkpoint_and_resume_finishes_it(cli, tmp_path: Path) -> None:
    cache = tmp_path / "agents"
    conf = tmp_path / "ppo.yml"  # a small budget of rl-zoo3's own PPO CartPole settings, with one override
    conf.write_text(yaml.safe_dump({"CartPole-v1": {"n_envs": 4, "policy": "MlpPolicy", "n_timesteps": 40_000}}))
    command = [sys.executable, "-m", "quarl_bench.cli", "train", "--algo", "ppo", "--env", "CartPole-v1"]
    command += ["--cache", str(cache), "--conf-file", str(conf), "--save-freq", "2048", "--hyperparams", "n_steps:128"]
    training = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=hear_ctrl_c,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not any(checkpoints(f) for f in run_folders(cache, "ppo", "CartPole-v1")):
        time.sleep(0.5)
    os.killpg(training.pid, signal.SIGINT)  # as a user's Ctrl-C: the trainer and its rl-zoo3 child
    _, err = training.communicate(timeout=120)
    assert training.returncode != 0
    found = latest_checkpoint(cache, "ppo", "CartPole-v1")
    assert found is not None and "--resume" in err, err[-2000:]
    assert find_in_folder(cache, "ppo", "CartPole-v1", "trained") is None  # no finished agent yet
    code, out, err = cli(
        "train", "--algo", "ppo", "--env", "CartPole-v1", "--cache", cache, "--conf-file", conf, "--resume"
    )
    assert code == 0, err
    assert f"Resuming from {found[0]}" in out
    ref = find_in_folder(cache, "ppo", "CartPole-v1", "trained")
    assert ref is not None and not found[0].parent.exists()  # the finished run; the partial one merged into it
    assert f"-n {40_000 - found[1]}" in out  # the rest of the budget, from the checkpoint's step count on
    assert latest_checkpoint(cache, "ppo", "CartPole-v1") is None
