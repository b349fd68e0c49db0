"""Per-layer precisions, sensitivity, the mixed-precision search, decision margins and closed-loop fidelity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from quarl_bench.errors import QuarlError
from quarl_bench.evaluation.fidelity import actions_differ
from quarl_bench.evaluation.margins import StateReservoir, top2_gap
from quarl_bench.methods.mixed import greedy_allocation, one_layer_spec, rank_layers
from quarl_bench.quant.quantize import acting_bytes, acting_layer_names, quantize
from quarl_bench.store import ResultStore
from quarl_bench.store.results import load_results
from quarl_bench.types import QuantSpec


def toy_dqn():
    """A DQN with two acting layers (4 -> 16 -> 2) whose first layer holds one huge weight: at 4 bits its grid step
    is ~70, so every other first-layer weight rounds to zero, while the second layer's grid stays fine. The hidden
    unit the huge weight feeds is not read by the second layer, so fp32 outputs come from the ordinary weights."""
    from stable_baselines3 import DQN

    model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [16]}, seed=0, device="cpu")
    with torch.no_grad():
        model.policy.q_net.q_net[0].weight[0, 0] = 1000.0
        model.policy.q_net.q_net[2].weight[:, 0] = 0.0
    return model


def test_one_layer_spec_quantizes_only_that_layer() -> None:
    model = toy_dqn()
    policy = model.policy
    assert acting_layer_names(policy) == ["q_net.q_net.0", "q_net.q_net.2"]
    spec = one_layer_spec(2, 1, "int4")
    assert spec.layer_precisions == ("fp32", "int4") and spec.precision == "int4"
    quantized, stats = quantize(policy, spec)
    assert [s.name for s in stats] == ["q_net.q_net.2.weight"]
    assert torch.equal(quantized.q_net.q_net[0].weight, policy.q_net.q_net[0].weight)
    assert len(torch.unique(quantized.q_net.q_net[2].weight)) <= 16  # a 4-bit grid
    # bytes: 4x16 weights at 32 bits + 16 fp32 biases, 16x2 weights at 4 bits + 2 fp32 biases
    assert acting_bytes(policy, spec) == 64 * 4 + 16 * 4 + 32 // 2 + 2 * 4
    with pytest.raises(QuarlError, match="acts with 2 layers"):
        quantize(policy, QuantSpec(layer_precisions=("int8", "int4", "int8")))
    assert QuantSpec(layer_precisions=("int8", "int8")) == QuantSpec("int8")  # uniform is the uniform spec


def test_sensitivity_finds_the_fragile_layer_of_a_toy_policy() -> None:
    policy = toy_dqn().policy
    observations = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    with torch.no_grad():
        reference = policy.q_net(torch.as_tensor(observations))
    errors = {}
    for layer in range(2):
        quantized, _ = quantize(policy, one_layer_spec(2, layer, "int4"))
        with torch.no_grad():
            change = (quantized.q_net(torch.as_tensor(observations)) - reference).abs().mean() / reference.abs().mean()
        errors[(layer, "int4")] = 100 * float(change)
    assert errors[(0, "int4")] > 10 * errors[(1, "int4")]
    assert rank_layers(errors, 2) == [1, 0]  # least sensitive first


def test_greedy_allocation_lowers_the_least_sensitive_layers_first() -> None:
    def acceptable(allocation: tuple[str, ...]) -> bool:  # layer 1 needs 8 bits, the others take anything
        return allocation[1] in ("fp32", "int8")

    allocation, tried = greedy_allocation([0, 2, 1], ["int8", "int4", "int2"], acceptable, 3)
    assert allocation == ("int2", "int8", "int2")
    assert tried[0] == (("int8", "int8", "int8"), True)
    assert tried[-1] == (("int2", "int4", "int2"), False)
    assert len(tried) == 6  # start, layer 0 twice, layer 2 twice, layer 1 once

    fallback, _ = greedy_allocation([0], ["int8"], lambda a: a == ("fp32",), 1)
    assert fallback == ("fp32",)  # even the widest candidate fails: the search starts from fp32


def test_top2_gap_and_reservoir() -> None:
    assert list(top2_gap(np.array([[1.0, 3.0, 2.5], [0.0, 0.0, -1.0]]))) == [0.5, 0.0]
    reservoir = StateReservoir(capacity=5, seed=0)
    for start in range(0, 1000, 10):
        reservoir.add(np.arange(start, start + 10)[:, None])
    kept = reservoir.states().ravel()
    assert len(kept) == 5 and len(set(kept)) == 5 and reservoir.seen == 1000
    assert kept.max() >= 100  # not just the first rows


def test_actions_differ_discrete_and_continuous() -> None:
    from gymnasium import spaces

    assert list(actions_differ(np.array([0, 1]), np.array([0, 2]), spaces.Discrete(3))) == [False, True]
    box = spaces.Box(-2.0, 2.0, (1,))
    assert list(actions_differ(np.array([[0.0], [0.0]]), np.array([[0.03], [0.05]]), box)) == [False, True]


@pytest.mark.slow
def test_run_over_eval_seeds_with_random_baseline_and_noise_reports_statistics(cli, zoo: Path, tmp_path: Path) -> None:
    store, out = tmp_path / "q.sqlite", tmp_path / "report"
    code, out_text, err = cli(
        "run",
        "--algo",
        "dqn",
        "--env",
        "CartPole",
        "--bits",
        "8",
        "2",
        "-n",
        "4",
        "--eval-seeds",
        "0",
        "1",
        "--random-baseline",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert code == 0, err
    frame = load_results(store)
    assert sorted(frame.groupby("seed").size()) == [4, 4]  # fp32, int8, int2, random per seed
    random = frame[frame["method"] == "random"]
    assert len(random) == 2 and (random["mean_reward"] < 100).all()  # a random CartPole policy falls in ~20 steps
    fp32 = frame[(frame["precision"] == "fp32") & (frame["method"] == "ptq")]
    assert (fp32["margin_median"] > 0).all()  # margins measured on visited states
    code, _, err = cli(
        "run",
        "--algo",
        "dqn",
        "--env",
        "CartPole",
        "--bits",
        "8",
        "-n",
        "4",
        "--obs-noise",
        "0.5",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert code == 0, err
    noisy = load_results(store).query("perturbation == 'obs-noise-abs=0.5'")  # --obs-noise is that condition
    assert len(noisy) == 2 and set(noisy["key"]).isdisjoint(frame["key"])

    code, _, err = cli("report", "--all-files", "--store", store, "--out", out)
    assert code == 0, err
    statistics = __import__("pandas").read_csv(out / "reward_statistics.csv")
    int2 = statistics[(statistics["precision"] == "int2") & (statistics["obs noise"] == 0)].iloc[0]
    assert (
        int2["seeds"] == 2 and int2["seed list"] == "0 1" and len(int2["rows"].split()) == 4
    )  # two int2 rows and their two fp32 rows
    assert int2["P(q >= fp32)"] < 0.5 and int2["diff high"] < 0  # 2 bits break it
    safe = __import__("pandas").read_csv(out / "minimum_safe_bits.csv")
    assert str(safe.iloc[0]["minimum safe bits"]) in ("8", "> 8")
    # --random-baseline measured the random policy on the same seeds: the tolerance is a share of the gap to it
    assert safe.iloc[0]["δ of"] == "R_fp32 - R_random" and safe.iloc[0]["δ"] < 0.05 * safe.iloc[0]["fp32 mean"]
    aggregates = (out / "normalised_aggregates.md").read_text()
    assert "| algo       | dqn" in aggregates and (out / "performance_profile.png").is_file()


@pytest.mark.slow
def test_sensitivity_mixed_and_fidelity_on_a_zoo_agent(cli, zoo: Path, tmp_path: Path) -> None:
    store, out = tmp_path / "q.sqlite", tmp_path / "report"
    code, text, err = cli(
        "sensitivity",
        "--algo",
        "dqn",
        "--env",
        "CartPole",
        "--bits",
        "8",
        "2",
        "-n",
        "3",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert code == 0, err
    assert "q_net.q_net.4" in text
    code, text, err = cli(
        "mixed",
        "--algo",
        "dqn",
        "--env",
        "CartPole",
        "--bits",
        "8",
        "2",
        "-n",
        "3",
        "--verify-seeds",
        "7",
        "--tolerance",
        "5",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert code == 0, err
    frame = load_results(store)
    mixed = frame[frame["method"] == "mixed"].iloc[0]
    assert mixed["seed"] == 7
    search = frame[(frame["seed"] == 0) & (frame["method"] == "ptq")]
    fp32 = search[search["key"] == search["reference_key"]]["mean_reward"].iloc[0]
    allocation = json.loads(mixed["layer_bits"]) if mixed["layer_bits"] else [mixed["precision"]] * 3
    found = search[(search["layer_bits"] == mixed["layer_bits"]) & (search["precision"] == mixed["precision"])]
    assert found["mean_reward"].iloc[0] >= 0.95 * fp32  # the allocation met the tolerance where it was searched
    with ResultStore(store) as opened:  # every step was certified; the allocation kept was certified safe
        verdicts = opened.verdicts().set_index("spec")
    kept = "/".join(allocation) if mixed["layer_bits"] else mixed["precision"]  # one width for all: its name
    assert verdicts.loc[kept, "verdict"] == "safe"
    assert "unsafe" in set(verdicts["verdict"])  # int2 everywhere breaks CartPole's DQN
    assert len(allocation) == 3 and set(allocation) <= {"fp32", "int8", "int2"}

    code, text, err = cli(
        "fidelity",
        "--algo",
        "dqn",
        "--env",
        "CartPole",
        "--bits",
        "32",
        "2",
        "-n",
        "4",
        "--folder",
        zoo,
        "--store",
        store,
    )
    assert code == 0, err
    with ResultStore(store) as opened:
        rows = opened.fidelity().set_index("precision")
    assert rows.loc["fp32", "first_action"] == [None] * 4 and rows.loc["fp32", "first_obs"] == [None] * 4
    assert any(step is not None for step in rows.loc["int2", "first_action"])
    code, _, err = cli("report", "--all-files", "--store", store, "--out", out)
    assert code == 0, err
    for name in (
        "sensitivity.md",
        "mixed_pareto.md",
        "fidelity.md",
        "sensitivity_dqn_CartPole-v1.png",
        "mixed_pareto_dqn_CartPole-v1.png",
        "fidelity_dqn_CartPole-v1.png",
    ):
        assert (out / name).is_file(), name


def test_bad_tolerance_and_overlapping_seeds_exit_2(cli, tmp_path: Path) -> None:
    store = tmp_path / "q.sqlite"
    code, _, err = cli("mixed", "--algo", "dqn", "--env", "CartPole", "--tolerance", "150", "--store", store)
    assert code == 2 and "bad tolerance '150'" in err
    code, _, err = cli(
        "mixed", "--algo", "dqn", "--env", "CartPole", "--search-seeds", "0", "--verify-seeds", "0", "--store", store
    )
    assert code == 2 and "bad --verify-seeds 0" in err and not store.exists()
    code, _, err = cli("run", "--algo", "dqn", "--env", "CartPole", "--obs-noise", "-1", "--store", store)
    assert code == 2 and "bad value '-1'" in err
