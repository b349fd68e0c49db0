"""The ActorQ study file: the paper's grid expands as documented, filters and overrides apply, bad input fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quarl_bench.actorq.config import ActorQConfig, load_actorq_grid, select_runs
from quarl_bench.actorq.exploration import explore, sigmas
from quarl_bench.config import config_dir
from quarl_bench.errors import QuarlError


def test_paper_grid_has_the_gym_and_control_suite_runs() -> None:
    runs = load_actorq_grid(config_dir() / "actorq.yaml")
    # dqn x 3 envs, td3 x 2, d4pg x the paper's 8 DMC tasks; 3 precisions; 5 seeds (a speed-up's interval)
    assert len(runs) == (3 * 3 + 2 * 3 + 8 * 3) * 5 and {r.seed for r in runs} == {0, 1, 2, 3, 4}
    runs = [r for r in runs if r.seed == 0]
    d4pg = {r.env_id: r for r in runs if r.algo == "d4pg"}
    # the paper's budgets (Table 3: steps trained, over 2 actors) and pull periods, per task
    assert (d4pg["dmc/cartpole-balance-v0"].max_actor_steps, d4pg["dmc/cartpole-balance-v0"].pull_period) == (
        20000,
        1000,
    )
    assert (d4pg["dmc/humanoid-walk-v0"].max_actor_steps, d4pg["dmc/humanoid-walk-v0"].pull_period) == (350000, 100)
    assert {(r.algo, r.env_id) for r in runs} >= {("dqn", "MountainCar-v0"), ("td3", "Pendulum-v1")}
    assert all(r.policy_arch == (2048, 2048, 2048) and r.n_actors == 2 for r in runs)
    cartpole = select_runs(runs, envs=["CartPole"], precisions=["fp32", "int8"])
    assert [(r.env_id, r.actor_precision) for r in cartpole] == [("CartPole-v1", "fp32"), ("CartPole-v1", "int8")]
    # fp32 and int8 runs of one setting share the run key, so the report can pair them
    assert cartpole[0].run_key() == cartpole[1].run_key()


def test_command_line_settings_override_the_file() -> None:
    runs = load_actorq_grid(config_dir() / "actorq.yaml", {"max_actor_steps": 1000, "policy_arch": (64,)})
    assert {(r.max_actor_steps, r.policy_arch) for r in runs} == {(1000, (64,))}


def test_bad_grid_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(QuarlError, match="not found"):
        load_actorq_grid(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("settings: {n_actor: 2}\ngrid: []\n")
    with pytest.raises(QuarlError, match="bad setting 'n_actor'"):
        load_actorq_grid(bad)
    bad.write_text("grid:\n  - {algos: [dqn], envs: [CartPole-v1], precisions: [int4]}\n")
    with pytest.raises(QuarlError, match="bad actor precision 'int4'"):
        load_actorq_grid(bad)


def test_continuous_exploration_spreads_sigma_and_stays_in_bounds() -> None:
    import gymnasium as gym
    import numpy as np

    assert sigmas(3) == [0.0, 0.1, 0.2] and sigmas(1) == [0.1]
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    rng = np.random.default_rng(0)
    env_actions, stored = zip(
        *(explore(np.array([0.99], np.float32), space, 0.2, rng) for _ in range(500)), strict=True
    )
    assert all(-1 <= s[0] <= 1 for s in stored) and all(-2 <= a[0] <= 2 for a in env_actions)
    assert np.allclose(np.array(env_actions), 2 * np.array(stored))  # rescaled from [-1, 1] to [-2, 2]
    assert explore(np.array([0.5], np.float32), space, 0.0, rng)[1][0] == pytest.approx(0.5)  # sigma 0: no noise


def test_dqn_target_sync_keeps_rl_zoo3_updates_per_sync() -> None:
    """rl-zoo3's CartPole DQN trains 128 updates every 256 steps and syncs after each burst: 128 updates per sync.
    (Counting its 10 env steps at actor speed instead synced every 5 updates and DQN never learned.)"""
    from quarl_bench.actorq.learner import target_sync_every, zoo_hyperparams

    assert target_sync_every(zoo_hyperparams("dqn", "CartPole-v1")) == 128
    assert target_sync_every(zoo_hyperparams("dqn", "MountainCar-v0")) == 300  # 600 steps x 8 updates / 16 steps
    assert target_sync_every(zoo_hyperparams("dqn", "Acrobot-v1")) == 250  # gradient_steps -1: one update per step
    td3 = zoo_hyperparams("td3", "Pendulum-v1")
    assert td3["gamma"] == 0.98 and td3["learning_starts"] == 10_000 and "noise_std" not in td3


def test_requested_runs_from_flags_or_grid() -> None:
    from quarl_bench.actorq.config import requested_runs

    (single,) = requested_runs(None, {"n_actors": 1}, env="Pendulum", algo="td3", seeds=[3])
    assert (single.algo, single.env_id, single.actor_precision, single.n_actors, single.seed) == (
        "td3",
        "Pendulum-v1",
        "int8",
        1,
        3,
    )
    runs = requested_runs(config_dir() / "actorq.yaml", {"max_seconds": 60.0}, algo="td3", precision="fp16", seeds=[1])
    assert [(r.env_id, r.seed, r.max_seconds) for r in runs] == [
        ("Pendulum-v1", 1, 60.0),
        ("MountainCarContinuous-v0", 1, 60.0),
    ]
    seeded = requested_runs(None, {}, seeds=[0, 1])  # one run per seed, one setting: the report pairs them
    assert [r.seed for r in seeded] == [0, 1] and seeded[0].run_key() == seeded[1].run_key()
    with pytest.raises(QuarlError, match="no run in .* matches --algo ddpg"):
        requested_runs(config_dir() / "actorq.yaml", {}, algo="ddpg")


def test_time_to_95_percent_works_for_negative_rewards() -> None:
    from quarl_bench.actorq.metrics import reward_target, time_to_reward

    cartpole = [{"seconds": 0, "reward": 10.0}, {"seconds": 5, "reward": 250.0}, {"seconds": 9, "reward": 210.0}]
    pendulum = [{"seconds": 0, "reward": -1300.0}, {"seconds": 5, "reward": -400.0}, {"seconds": 9, "reward": -100.0}]
    assert reward_target(cartpole) == pytest.approx(238.0) and time_to_reward(cartpole, 238.0) == 5
    assert reward_target(pendulum) == pytest.approx(-160.0) and time_to_reward(pendulum, -160.0) == 9


def test_speedup_table_gets_the_papers_figures_for_the_same_task_and_precision() -> None:
    import pandas as pd

    from quarl_bench.report.actorq import with_paper

    paper = pd.read_csv(config_dir() / "paper" / "actorq_table2.csv")
    ours = pd.DataFrame(
        {
            "env": ["dmc/cartpole-balance-v0", "dmc/cartpole-balance-v0", "CartPole-v1", "Pendulum-v1"],
            "precision": ["fp32", "int8", "fp16", "int8"],
        }
    )
    table = with_paper(ours, paper)
    assert table["paper algo"].tolist()[:3] == ["d4pg", "d4pg", "dqn"] and pd.isna(table["paper algo"].iloc[3])
    assert table["paper time to target (s)"].tolist()[:3] == [870.91, 279.00, 535.09]
    assert table["paper speed-up"].tolist()[:3] == [1.0, 3.12, 1.80]
    assert table["paper target"].iloc[0] == 941.22


def test_policy_mismatch_is_bounded_agreement() -> None:
    import numpy as np

    from quarl_bench.actorq.param_quantizer import policy_mismatch

    q = np.array([[1.0, 2.0], [3.0, 0.0], [0.5, 0.4]])
    flipped = np.array([[1.0, 2.0], [0.0, 3.0], [0.5, 0.4]])  # the second greedy action differs
    point = policy_mismatch(flipped, q, discrete=True)
    assert point["agreement"] == pytest.approx(2 / 3) and point["q_error"] == pytest.approx(
        6 / 6.9
    )  # mean abs difference 1, mean abs Q 1.15
    actions = np.array([[0.5], [-1.0]])
    assert policy_mismatch(actions, actions, discrete=False) == {"agreement": 1.0, "action_error": 0.0}
    opposite = policy_mismatch(np.array([[1.0], [-1.0]]), np.array([[-1.0], [1.0]]), discrete=False)
    assert opposite["agreement"] == 0.0 and opposite["action_error"] == pytest.approx(2.0)


def test_speedup_ci_over_seeds_marks_speedups_the_seeds_do_not_support() -> None:
    from quarl_bench.report.estimators import paired_ratio_ci

    ratio, low, high = paired_ratio_ci([10.0, 12.0, 11.0], [5.0, 6.0, 5.5])
    assert ratio == pytest.approx(2.0) and low == pytest.approx(2.0) and high == pytest.approx(2.0)
    ratio, low, high = paired_ratio_ci([10.0, 20.0, 15.0], [20.0, 10.0, 15.0])
    assert ratio == pytest.approx(1.0) and low < 1.0 < high
    assert np.isnan(paired_ratio_ci([10.0], [5.0])[1])


def test_a_run_that_trained_nothing_is_refused_and_never_becomes_a_speed_up(monkeypatch, tmp_path: Path) -> None:
    """ActorQ runs of 0 actor steps or 0 learner updates (too short a --max-seconds) once went into the store and
    the report derived "time to 95%" and a 0.45x speed-up from them: they are refused in one line, and rows stored
    before that are left out of the runs the tables read."""
    import pandas as pd

    import quarl_bench.methods.actorq as handler_module
    from quarl_bench.actorq.driver import RunOutcome, actorq_result, degenerate
    from quarl_bench.errors import QuarlError
    from quarl_bench.jobs.work import Work
    from quarl_bench.report.actorq import actorq_runs

    config = ActorQConfig(algo="dqn", env_id="CartPole-v1", n_actors=1, max_seconds=1.0)
    idle = RunOutcome(wall_seconds=61.0, learner={"per_actor": {"0": 0}, "updates": 0}, final_rewards=[9.0])
    untrained = RunOutcome(wall_seconds=61.0, learner={"per_actor": {"0": 500}, "updates": 0}, final_rewards=[9.0])
    trained = RunOutcome(wall_seconds=61.0, learner={"per_actor": {"0": 500}, "updates": 40}, final_rewards=[9.0])
    assert degenerate(idle) == "0 actor steps and 0 learner updates in 61 s"
    assert degenerate(untrained) == "500 actor steps and 0 learner updates in 61 s"
    assert degenerate(trained) is None

    monkeypatch.setattr(handler_module, "run_actorq", lambda *args: idle)
    with pytest.raises(
        QuarlError, match=r"trained nothing \(0 actor steps and 0 learner updates in 61 s\): not stored"
    ):
        list(handler_module.ActorQHandler().produce(Work(config), None, []))

    rows = [actorq_result(config, outcome).__dict__ for outcome in (idle, trained)]
    frame = pd.DataFrame(
        [
            {
                "method": "actorq",
                "created_at": index,
                "key": f"k{index}",
                "env_id": "CartPole-v1",
                "algo": "dqn",
                "precision": "int8",
                "seed": index,
                "mean_reward": 9.0,
                "setting": "s",
                "agent_hash": "",
                "provenance": row["provenance"],
            }
            for index, row in enumerate(rows)
        ]
    )
    assert list(actorq_runs(frame)["seed"]) == [1]  # the idle run is not a run the tables compare


def test_a_run_records_the_load_before_its_own_processes_started(monkeypatch) -> None:
    """An ActorQ run keeps both cores busy with its learner and actors: the load read after it would flag every run
    ``busy``. Its row records the load the run began under."""
    import quarl_bench.actorq.driver as driver
    from quarl_bench.actorq.driver import RunOutcome, actorq_result

    monkeypatch.setattr(driver, "load_record", lambda: {"load_1m": 3.1, "cores": 2, "busy": True})
    config = ActorQConfig(algo="dqn", env_id="CartPole-v1", n_actors=1, max_seconds=1.0)
    before = {"load_1m": 0.4, "cores": 2, "busy": False}
    outcome = RunOutcome(wall_seconds=61.0, learner={"per_actor": {"0": 500}, "updates": 40}, final_rewards=[9.0])
    assert actorq_result(config, RunOutcome(**{**outcome.__dict__, "load": before})).provenance["load"] == before


FLAT_EPISODES = [9.0, 9.0, 10.0, 8.0, 9.0, 10.0, 9.0, 8.0, 10.0, 9.0]


def _actorq_row(precision: str, rewards: list[float], updates: int, ratio: float, seed: int = 0) -> dict:
    """A stored ``actorq`` row of a CartPole run whose evaluations (10 s apart) average ``rewards``."""
    from quarl_bench.actorq.driver import RunOutcome, actorq_result

    shifted = [[r - 9.0 + e for e in FLAT_EPISODES] for r in rewards]
    curve = [{"seconds": 10.0 * i, "reward": sum(e) / 10, "episodes": e} for i, e in enumerate(shifted)]
    config = ActorQConfig(algo="dqn", env_id="CartPole-v1", actor_precision=precision, max_actor_steps=500, seed=seed)
    learner = {"per_actor": {"0": 500}, "updates": updates, "samples_per_insert": ratio}
    outcome = RunOutcome(wall_seconds=60.0, learner=learner, final_rewards=[9.0], curve=curve)
    return {
        "method": "actorq",
        "created_at": f"{precision}{seed}",
        "key": f"{precision}{seed}",
        "env_id": "CartPole-v1",
        "algo": "dqn",
        "precision": precision,
        "seed": seed,
        "mean_reward": 9.0,
        "setting": "s",
        "agent_hash": "",
        "provenance": actorq_result(config, outcome).provenance,
    }


def test_a_learner_that_never_learned_gives_no_time_and_the_papers_target_is_counted() -> None:
    """On a 2-core CPU the paper's 2048x3 DQN learner made 363 updates in 138 s (rl-zoo3 takes ~24,500 to learn
    CartPole) and its reward went 9.2 -> 9.6: "time to 95% of the fp32 run's best" was then a time to noise. Such a
    run gives no time and says why; the paper's own target (CartPole 198.22) is counted on every run."""
    import pandas as pd

    from quarl_bench.report.actorq import actorq_runs, speedup_table, with_paper

    row = _actorq_row
    noise = pd.DataFrame([row("fp32", [9.0, 9.2, 9.6, 9.1], 387, 0.99), row("int8", [9.0, 9.4, 9.0], 390, 1.0)])
    table = speedup_table(actorq_runs(noise))
    assert table["time to 95% (s)"].isna().all() and table["seeds reaching"].tolist() == ["0/1", "0/1"]
    assert "the fp32 run of seed 0 never beat its first evaluation" in table["caveat"].iloc[0]
    assert "learner-bound: it replayed each sample 0.99 times of the 16 allowed" in table["caveat"].iloc[0]

    learning = pd.DataFrame([row("fp32", [9.0, 120.0, 205.0], 9000, 15.8), row("int8", [9.0, 210.0, 250.0], 9000, 16)])
    runs = actorq_runs(learning)
    table = speedup_table(runs)
    assert table["time to 95% (s)"].tolist() == [20.0, 10.0] and table["caveat"].tolist() == ["", ""]
    paper = pd.read_csv(config_dir() / "paper" / "actorq_table2.csv")
    joined = with_paper(table, paper, runs)
    assert joined["seeds reaching paper target"].tolist() == ["1/1", "1/1"]
    assert joined["time to paper target (s)"].tolist() == [20.0, 10.0]  # 198.22: fp32 at 20 s, int8 at 10 s

    # the same curves from learners that replayed each sample once of the 16 allowed: they compare how many updates
    # each learner made (a run of faster actors ends sooner), not how fast the actors were
    bound = pd.DataFrame([row("fp32", [9.0, 120.0, 205.0], 390, 1.0), row("int8", [9.0, 210.0, 250.0], 50, 0.13)])
    table = speedup_table(actorq_runs(bound))
    assert table["time to 95% (s)"].isna().all() and pd.isna(table["time speed-up"].iloc[1])
    assert table["caveat"].iloc[1].startswith("seed 0: learner-bound: it replayed each sample 0.13 times")


def test_the_load_before_a_run_counts_the_cores_others_used_not_the_last_minute(monkeypatch) -> None:
    """The 1-minute load average after a grid's previous run still counts that run (3.1 on 2 cores, 'busy', for
    every run after the first): the record taken before a run also samples which share of the CPUs others used."""
    from quarl_bench.deploy import machine

    monkeypatch.setattr("psutil.cpu_percent", lambda interval: 25.0)  # a quarter of every CPU's time was busy
    monkeypatch.setattr("os.getloadavg", lambda: (3.1, 2.0, 1.0))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    record = machine.load_before_run(seconds=0.0)
    assert record == {"load_1m": 3.1, "cores": 2, "busy": False, "busy_cores": 0.5}
    assert machine.load_text(record) == "load 3.10 on 2 cores, 0.50 busy before it"


def test_every_published_cell_of_actorq_table2_has_a_status_on_the_paper_page() -> None:
    """ActorQ Table 2's 33 cells (11 tasks: fp32's time to target, the fp16 and int8 speed-ups) appear with ours:
    a speed-up is judged against our CI over seeds, undetermined (and why) without one, not measured without runs."""
    import pandas as pd

    from quarl_bench.report.actorq import actorq_paper_cells
    from quarl_bench.report.paper_page import paper_page_report

    paper = config_dir() / "paper"
    bound = pd.DataFrame([_actorq_row("fp32", [9.0, 9.2, 9.6], 387, 0.99), _actorq_row("int8", [9.0, 9.4], 50, 0.13)])
    cells = actorq_paper_cells(bound, paper).set_index(["env", "precision"])
    assert len(cells) == 33 and (cells["table"] == "ActorQ Table 2").all()
    assert cells.loc[("CartPole-v1", "fp32"), "status"] == "reference"
    assert cells.loc[("CartPole-v1", "int8"), "status"] == "undetermined"
    assert "learner-bound" in cells.loc[("CartPole-v1", "int8"), "why"]
    assert cells.loc[("CartPole-v1", "fp16"), "status"] == "not measured"
    assert (cells.drop(index="CartPole-v1", level="env")["status"] == "not measured").all()

    # two seeds whose int8 runs reach 95% of fp32's best 2x and 4x sooner: a CI of [2, 4] holds the paper's 3.70x
    seeds = [
        _actorq_row(precision, rewards, 9000, 16.0, seed)
        for seed, (fast, slow) in enumerate([(1, 2), (1, 4)])
        for precision, rewards in (("fp32", [9.0] * slow + [250.0]), ("int8", [9.0] * fast + [250.0]))
    ]
    cells = actorq_paper_cells(pd.DataFrame(seeds), paper).set_index(["env", "precision"])
    assert cells.loc[("CartPole-v1", "int8"), "status"] == "reproduced"
    notes: list[str] = []
    tables = {table.name: table for table in paper_page_report(pd.DataFrame(), paper, notes, pd.DataFrame(seeds))}
    summary = tables["paper_summary"].frame.set_index("table")
    assert summary.loc["ActorQ Table 2", ["reproduced", "reference", "not measured"]].tolist() == [1, 1, 31]
    assert any(note.startswith("ActorQ Table 2: of 33 published cells, 1 reproduced") for note in notes)


def test_the_time_speed_up_keeps_runs_that_never_reach_the_target_and_is_decided_by_its_interval() -> None:
    """Five seeds, one target (the median of fp32's 95% targets, 237.95): fp32 crosses it at 29.5 s (three seeds)
    or 39.5 s, int8 at 9.5 s or 19.5 s, but seed 4's int8 run never reaches it (censored at 50 s, not dropped):
    fp32's Kaplan-Meier median (29.5 s) over int8's (19.5 s: the censored run still counts among those at risk)."""
    import pandas as pd

    from quarl_bench.report.actorq import actorq_runs, speedup_table

    rows = []
    for seed in range(5):
        slow = 3 + seed % 2  # fp32 crosses between its 3rd and 4th, or 4th and 5th evaluation
        rows.append(_actorq_row("fp32", [9.0] * slow + [250.0, 250.0], 9000, 16.0, seed))
        fast = [9.0] * (1 + seed % 2) + [250.0] * 3 if seed < 4 else [9.0] * 6  # seed 4: never
        rows.append(_actorq_row("int8", fast, 9000, 16.0, seed))
    table = speedup_table(actorq_runs(pd.DataFrame(rows))).set_index("precision")
    int8 = table.loc["int8"]
    assert int8["reached target"] == "4/5" and table.loc["fp32", "reached target"] == "5/5"
    assert int8["median time to target (s)"] == pytest.approx(19.5)  # crossings at 9.5 s and 19.5 s; one censored
    assert int8["time speed-up"] == pytest.approx(29.5 / 19.5)
    assert int8["verdict"] in ("faster", "undetermined") and int8["time CI low"] <= int8["time speed-up"]
    flat = [_actorq_row("fp32", [9.0] * 6, 9000, 16.0, s) for s in range(3)]
    flat += [_actorq_row("int8", [9.0] * 6, 9000, 16.0, s) for s in range(3)]
    table = speedup_table(actorq_runs(pd.DataFrame(flat))).set_index("precision")
    assert table.loc["int8", "verdict"] == "undetermined" and "no fp32 run learned" in table.loc["int8", "why"]


def test_the_plan_says_how_many_runs_fit_side_by_side_and_whether_they_fit_a_budget() -> None:
    from quarl_bench.actorq.plan import plan_runs

    runs = [ActorQConfig("CartPole-v1", p, seed=s, max_seconds=95.0) for s in range(5) for p in ("fp32", "int8")]
    gpu_slot = plan_runs(runs, cores=16, gpus=1, budget=600.0)  # a lent H200 machine: 16 cores, learners on the GPU
    assert (gpu_slot.per_run, gpu_slot.side_by_side, gpu_slot.batches) == (3, 5, 2) and gpu_slot.fits
    assert "run them with --concurrent 5" in gpu_slot.lines()
    here = plan_runs(runs, cores=2, gpus=0, budget=600.0)  # 2 cores: a run's 2 actors, learner and quantizer
    assert (here.per_run, here.side_by_side, here.batches) == (4, 1, 10) and here.fits is False
    unbounded = plan_runs([ActorQConfig("CartPole-v1")], cores=2, gpus=0)
    assert unbounded.seconds is None and any("pass --max-seconds" in line for line in unbounded.lines())
