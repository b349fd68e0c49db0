"""The SQLite results store: keys, atomic upserts, concurrent writers, DataFrame export."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from quarl_bench.store import ResultStore, load_results
from quarl_bench.types import EvalResult, Job, QuantSpec


def make_result(precision: str = "int8", seed: int = 0, reward: float = 10.0) -> EvalResult:
    job = Job("ppo", "CartPole-v1", QuantSpec(precision), "abc123", episodes=2, seed=seed, n_envs=2)
    return EvalResult(job, (reward, reward + 2.0), (10, 12), 0.5, provenance={"agent_source": "folder"})


@pytest.mark.parametrize("fp32_first", [True, False])
def test_put_get_and_relative_error_in_either_order(tmp_path: Path, fp32_first: bool) -> None:
    quantized, fp32 = make_result(reward=90.0), make_result("fp32", reward=99.0)
    with ResultStore(tmp_path / "s.sqlite") as store:
        assert not store.has(quantized.job.key)
        for result in (fp32, quantized) if fp32_first else (quantized, fp32):
            assert store.put(result)
        row = store.get(quantized.job.key)
        assert store.get(fp32.job.key)["error_pct"] is None
    assert row["mean_reward"] == 91.0 and row["std_reward"] == 1.0
    assert row["fp32_reward"] == 100.0 and row["error_pct"] == 9.0  # (100 - 91) / 100 * 100
    assert row["episode_rewards"] == [90.0, 92.0] and row["total_steps"] == 22


def test_existing_job_is_kept_unless_replaced(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "s.sqlite") as store:
        assert store.put(make_result(reward=1.0))
        assert not store.put(make_result(reward=5.0))
        assert store.get(make_result().job.key)["mean_reward"] == 2.0
        assert store.put(make_result(reward=5.0), replace=True)
        assert store.get(make_result().job.key)["mean_reward"] == 6.0
        assert len(store.to_dataframe()) == 1


def test_job_key_is_stable_and_depends_on_every_field() -> None:
    assert make_result().job.key == make_result().job.key
    assert make_result(seed=1).job.key != make_result().job.key
    assert make_result("int4").job.key != make_result().job.key


def _write_rows(path: str, start: int) -> None:
    with ResultStore(path) as store:
        for seed in range(start, start + 25):
            store.put(make_result(seed=seed))


def test_concurrent_writers_lose_no_row(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sqlite")
    ResultStore(path).close()
    workers = [multiprocessing.get_context("spawn").Process(target=_write_rows, args=(path, i * 25)) for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    frame = load_results(path)
    assert len(frame) == 75 and frame["key"].is_unique
