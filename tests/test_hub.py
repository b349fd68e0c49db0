"""The hub path: a shared-zoo agent repackaged as ``sb3/{algo}-{env_id}``, served over the hub's file protocol
from 127.0.0.1 (``HF_ENDPOINT``), fetched by ``quarl-bench run`` through rl-zoo3 and huggingface_hub into the cache."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hub_server import HubServer

from quarl_bench.store.results import load_results

pytestmark = pytest.mark.slow


def hub_repo(run_dir: Path, algo: str, env_id: str) -> dict[str, bytes]:
    """The files of an rl-zoo3 agent as the sb3 organisation publishes them on the hub."""
    config = run_dir / env_id
    metrics = io.BytesIO()
    with zipfile.ZipFile(metrics, "w") as archive:
        archive.writestr("0.monitor.csv", '#{"t_start": 0}\nr,l,t\n500.0,500,1.0\n')
    files = {
        f"{algo}-{env_id}.zip": (run_dir / f"{env_id}.zip").read_bytes(),
        "config.yml": (config / "config.yml").read_bytes(),
        "args.yml": (config / "args.yml").read_bytes(),
        "env_kwargs.yml": b"{}\n",
        "train_eval_metrics.zip": metrics.getvalue(),
    }
    if (config / "vecnormalize.pkl").is_file():
        files["vec_normalize.pkl"] = (config / "vecnormalize.pkl").read_bytes()
    return files


def quarl_bench(*args: object, endpoint: str, home: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"HF_ENDPOINT": endpoint, "HF_HOME": str(home / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    env.pop("TRUST_REMOTE_CODE", None)
    env.pop("QUARL_ZOO", None)  # a zoo named by the environment would answer before the hub
    exe = Path(sys.executable).with_name("quarl-bench")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, env=env, timeout=600, cwd=home)


def test_run_downloads_a_hub_agent_into_the_cache(zoo: Path, tmp_path: Path) -> None:
    repo = hub_repo(zoo / "ppo" / "CartPole-v1_1", "ppo", "CartPole-v1")  # no vecnormalize: an optional file 404s
    cache, store = tmp_path / "cache", tmp_path / "quarl.sqlite"
    run = ("run", "--algo", "ppo", "--env", "CartPole", "--bits", "8", "-n", "10", "--cache", cache, "--store", store)
    with HubServer({"sb3/ppo-CartPole-v1": repo}) as hub:
        refused = quarl_bench(*run, endpoint=hub.url, home=tmp_path)
        assert refused.returncode == 2 and "--trust-remote-code" in refused.stderr
        assert not cache.exists() and not store.exists()  # nothing fetched, nothing written
        done = quarl_bench(*run, "--trust-remote-code", endpoint=hub.url, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "GET /sb3/ppo-CartPole-v1/resolve/main/ppo-CartPole-v1.zip" in hub.requests
    assert any("vec_normalize.pkl" in request for request in hub.requests)  # asked for, answered 404, tolerated
    run_dir = cache / "ppo" / "CartPole-v1_1"
    assert (run_dir / "CartPole-v1.zip").read_bytes() == repo["ppo-CartPole-v1.zip"]
    assert {p.name for p in (run_dir / "CartPole-v1").iterdir()} >= {"config.yml", "args.yml", "env_kwargs.yml"}
    rows = load_results(store).set_index("precision")
    assert (rows["agent_source"] == "hub").all() and rows.loc["fp32", "mean_reward"] == 500.0
    assert "TRUST_REMOTE_CODE" not in os.environ
