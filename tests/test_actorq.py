"""ActorQ end to end on a local Ray cluster: int8 actors, pulls at the pull period, transitions reach the
learner, the breakdown and the store row are written, and a killed actor is restarted without ending the run."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import ray

from quarl_bench.actorq.metrics import breakdown
from quarl_bench.actorq.run import ActorQConfig, epsilons, run_actorq, store_run
from quarl_bench.errors import QuarlError
from quarl_bench.store import ResultStore, load_results

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_epsilon_spread_and_config_validation() -> None:
    spread = epsilons(4)
    assert (
        spread[0] == pytest.approx(0.4)
        and spread[-1] == pytest.approx(0.4**8)
        and spread == sorted(spread, reverse=True)
    )
    with pytest.raises(QuarlError, match="bad actor precision 'int4'"):
        ActorQConfig("CartPole-v1", actor_precision="int4")


def test_short_run_with_a_killed_actor(tmp_path: Path) -> None:
    config = ActorQConfig("CartPole-v1", "int8", comm_bits=8, n_actors=2, policy_arch=(64, 64), pull_period=500,
                          batch_size=64, max_actor_steps=3000, eval_every_s=2.0, eval_episodes=3)  # fmt: skip
    killed: list[int] = []

    def kill_first_actor_once(point, quantizer) -> None:
        pids = ray.get(quantizer.pids.remote())
        if not killed and 0 in pids:  # at the first evaluation, while the actors are collecting
            pid = pids[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    outcome = run_actorq(config, on_eval=kill_first_actor_once)
    assert killed and outcome.restarts >= 1
    assert len(outcome.actors) == 2 and all(a["int8_weights"] for a in outcome.actors)
    for actor in outcome.actors:
        assert actor["steps"] == 3000
        assert actor["pulls"] == 3000 // 500  # a pull at step 0, 500, ..., 2500
    assert outcome.learner["inserted"] >= 6000  # every transition of the final incarnations reached the buffer
    assert outcome.learner["updates"] > 0
    assert outcome.broadcast_bytes < 4 * (4 * 64 + 64 * 64 + 64 * 2)  # 8-bit broadcasts: ~1 byte per weight
    assert breakdown(outcome.actors)["step"] > 0
    assert outcome.energy["kwh"] > 0 and outcome.energy["source"] in ("hardware counters", "estimate (TDP x CPU load)")
    with ResultStore(tmp_path / "quarl.sqlite") as store:
        row = store_run(config, outcome, store)
    frame = load_results(tmp_path / "quarl.sqlite")
    assert list(frame["method"]) == ["actorq"] and row["provenance"]["restarts"] >= 1 and row["provenance"]["curve"]
