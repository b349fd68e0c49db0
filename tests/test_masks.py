"""Action masks reach every policy played on a masked env (sb3-contrib's ``action_masks()``): a MaskablePPO agent
trained here on an env whose masks forbid half its actions plays only legal actions at fp32 and int8, from ``run``
and ``certify``, greedy, sampled and epsilon-greedy; export of such an agent is refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from quarl_bench.evaluation.masks import masked_argmax, masked_probabilities
from quarl_bench.store import ResultStore

DATA = Path(__file__).parent / "data"


def test_a_mask_keeps_the_best_legal_action_and_renormalises_the_legal_probabilities() -> None:
    values = np.array([[3.0, 1.0, 2.0], [0.5, 0.4, 0.1]])
    masks = np.array([[False, True, True], [False, False, True]])
    assert list(masked_argmax(values, masks)) == [2, 2]
    probs = masked_probabilities(np.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]]), masks)
    np.testing.assert_allclose(probs, [[0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])  # all mass illegal: uniform over legal


@pytest.fixture(scope="module")
def masked_agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MaskablePPO trained 6,000 steps on MaskedPick-v0 (about 7 s): it picks among legal actions well, and its
    unmasked greedy action is illegal about half the time."""
    import torch
    from sb3_contrib import MaskablePPO

    sys.path.insert(0, str(DATA))
    import masked_pick  # noqa: F401  (registers MaskedPick-v0)

    torch.set_num_threads(1)
    model = MaskablePPO("MlpPolicy", "MaskedPick-v0", n_steps=256, batch_size=64, learning_rate=1e-3, seed=0)
    model.learn(6_000)
    path = tmp_path_factory.mktemp("masked") / "maskable.zip"
    model.save(path)
    return path


def rows(store: Path):
    with ResultStore(store) as opened:
        return opened.to_dataframe()


@pytest.mark.slow
def test_a_maskable_agent_plays_only_legal_actions_at_fp32_and_int8(cli, masked_agent: Path, tmp_path: Path) -> None:
    store = tmp_path / "masked.sqlite"
    agent = ("--model", masked_agent, "--env", "MaskedPick-v0", "--env-package", "masked_pick")
    code, out, err = cli("run", *agent, "--bits", "32", "8", "-n", "20", "--store", store)
    assert code == 0, err
    frame = rows(store).set_index("precision")
    assert set(frame["algo"]) == {"ppo_mask"}  # MaskablePPO is in the algorithm table
    for precision in ("fp32", "int8"):
        agreement = frame.loc[precision, "agreement"]
        assert agreement["illegal_actions"] == 0 and agreement["masked_decisions"] == 20 * 20  # every decision masked
        assert agreement["mask_changed_share"] > 0.3  # the mask mattered: unmasked, these would have been illegal
    # a legal pick is worth 0.5 at random and 0.75 at best (the largest of three uniform values); illegal costs -1
    assert frame.loc["fp32", "mean_reward"] / 20 > 0.65
    assert frame.loc["int8", "agreement"]["action_agreement"] > 0.95  # greedy actions compared under the same mask

    code, out, err = cli("certify", *agent, "--bits", "8", "--store", store, "--json")
    assert code == 0, err
    certified = rows(store)
    assert set(certified["method"]) == {"ptq", "random"}  # the random policy (δ's scale) is masked too
    assert all(row["illegal_actions"] == 0 for row in certified["agreement"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sampled", "epsilon-greedy"])
def test_sampled_and_exploring_actions_stay_legal(masked_agent: Path, mode: str) -> None:
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    from quarl_bench.action_modes import ActionMode
    from quarl_bench.evaluation.evaluate import evaluate

    policy = MaskablePPO.load(masked_agent, device="cpu").policy
    env = make_vec_env("MaskedPick-v0", n_envs=2, seed=0)
    episodes = evaluate(policy, env, 6, 0, ActionMode(mode, 0.5 if mode == "epsilon-greedy" else 0.0))
    assert episodes.agreement["illegal_actions"] == 0 and episodes.agreement["masked_decisions"] == 6 * 20
    assert min(episodes.rewards) > 0  # no -1 step dragged an episode below zero


@pytest.mark.slow
def test_fidelity_plays_both_policies_under_the_envs_masks(masked_agent: Path) -> None:
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    from quarl_bench.evaluation.fidelity import side_by_side
    from quarl_bench.evaluation.fidelity_over_time import over_time
    from quarl_bench.quant.quantize import quantize
    from quarl_bench.types import QuantSpec

    fp32 = MaskablePPO.load(masked_agent, device="cpu").policy
    int4, _ = quantize(fp32, QuantSpec("int4"))
    envs = [make_vec_env("MaskedPick-v0", n_envs=3, seed=0) for _ in range(3)]
    over_time(fp32, int4, envs[0])
    side_by_side(fp32, int4, envs[1], envs[2], threshold=0.1)
    played = [env.envs[i].unwrapped for env in envs for i in range(3)]
    assert all(env.played >= 20 for env in played) and sum(env.illegal_played for env in played) == 0


def test_export_of_an_agent_on_a_masked_env_is_one_line_and_writes_nothing(
    cli, masked_agent: Path, tmp_path: Path
) -> None:
    out = tmp_path / "artifact"
    agent = ("--model", masked_agent, "--env", "MaskedPick-v0", "--env-package", "masked_pick")
    code, _, err = cli("export", *agent, "--backend", "ort-fp32", "--out", out, "--store", tmp_path / "s.sqlite")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "env masks actions (action_masks()), and a ort-fp32 artifact takes no mask input" in err
    assert not out.exists()
