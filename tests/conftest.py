"""Shared fixtures: the pretrained zoo (``$QUARL_ZOO``, default ``../shared/zoo``) and a CLI runner."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from quarl_bench.cli import main

REPO = Path(__file__).resolve().parents[1]
ZOO = Path(os.environ.get("QUARL_ZOO", REPO.parent / "shared" / "zoo")).resolve()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--heavy",
        action="store_true",
        help="also run the tests marked heavy (the slowest end-to-end ones; a faster test takes each of their paths)",
    )


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that takes the pretrained zoo ``zoo`` (``-m "not zoo"``: the tests a fresh clone can run), and
    skip the ``heavy`` ones unless asked (``--heavy`` or ``QUARL_HEAVY_TESTS=1``): the default suite fits ~20 minutes
    on a 2-core AVX2 machine and still takes every path."""
    heavy = config.getoption("--heavy") or os.environ.get("QUARL_HEAVY_TESTS") == "1"
    for item in items:
        if "zoo" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.zoo)
        if item.get_closest_marker("ray"):  # one worker plays them, one after another (--dist loadgroup)
            item.add_marker(pytest.mark.xdist_group("ray"))
        if not heavy and item.get_closest_marker("heavy"):
            item.add_marker(pytest.mark.skip(reason="heavy: run with --heavy (or QUARL_HEAVY_TESTS=1)"))


@pytest.fixture(autouse=True)
def one_ray_cluster_at_a_time(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Tests marked ``ray`` hold one lock shared by every xdist worker: two Ray clusters at once on a loaded 2-core
    machine lost a worker or an actor. ``--dist loadgroup`` sends them to one worker already (pytest < 9: pytest 9
    no longer reads the node ids xdist 3.8 rewrites, and the group silently spread over both workers); the lock
    keeps them apart whatever the scheduler does."""
    if request.node.get_closest_marker("ray") is None:
        yield
        return
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # pytest-N/ above each worker's popen-gwK/
    with FileLock(shared / "quarl-bench-ray.lock"):
        yield


@pytest.fixture(scope="session")
def zoo() -> Path:
    if not (ZOO / "ppo").is_dir():
        pytest.skip(f"needs the pretrained zoo, not found at {ZOO}: set QUARL_ZOO")
    return ZOO


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``quarl-bench ARGS`` in-process; returns (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run


ATARI_ENV = "BreakoutNoFrameskip-v4"


def tiny_atari_agent(zoo: Path, folder: Path, algo: str, make_model: Callable) -> Path:
    """``make_model(env)`` trained for 16 steps on Breakout, saved in the zoo layout with the zoo's real config.yml
    (AtariWrapper, 4-frame stack); returns the zoo folder."""
    import shutil

    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    from quarl_bench.zoo.envs import register_env_packages

    register_env_packages()
    run_dir = folder / algo / f"{ATARI_ENV}_1"
    shutil.copytree(zoo / algo / f"{ATARI_ENV}_1" / ATARI_ENV, run_dir / ATARI_ENV)
    env = VecFrameStack(make_atari_env(ATARI_ENV, n_envs=1, seed=0), n_stack=4)
    model = make_model(env)
    model.learn(16)
    model.save(run_dir / f"{ATARI_ENV}.zip")
    env.close()
    return folder
