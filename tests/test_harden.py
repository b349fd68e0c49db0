"""``quarl-bench harden``: SAM on functions whose sharpness is known, the recipes' names, each bad input (one line,
exit 2, nothing written), every agent form (a user's zip with the RL loss, a torch module distilled to ONNX), and
the zoo's dqn CartPole hardened for int4 per channel and certified against its parent's fp32."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from quarl_bench.errors import QuarlError
from quarl_bench.training.harden.recipes import parse_recipe
from quarl_bench.training.sam import SAM, AlternatingSAM

TINY_POLICY = '''
import torch
from torch import nn


def policy():
    """Observations of CartPole -> two logits, fixed random weights."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
'''


def test_sam_step_on_a_quadratic_is_foret_et_al_s() -> None:
    """f(w) = 1.5 w^2 (sharpness 3) at w = 2, rho 0.5, SGD 0.1: ascend to 2.5, gradient there 7.5, so w = 1.25."""
    w = torch.nn.Parameter(torch.tensor([2.0]))
    sam = SAM(torch.optim.SGD([w], lr=0.1), rho=0.5)

    def closure() -> torch.Tensor:
        sam.zero_grad()
        loss = 1.5 * (w**2).sum()
        loss.backward()
        return loss

    loss = sam.step(closure)
    assert float(loss) == pytest.approx(6.0)  # the loss at w, not at the ascent
    assert float(w) == pytest.approx(1.25)
    assert not sam.perturbed


def test_sam_ascends_along_the_whole_gradient_norm() -> None:
    """f(x, y) = x^2 + 4 y^2 at (3, 1): g = (6, 8), |g| = 10, so rho 1 ascends by (0.6, 0.8) exactly."""
    w = torch.nn.Parameter(torch.tensor([3.0, 1.0]))
    sam = SAM(torch.optim.SGD([w], lr=0.0), rho=1.0)
    (w[0] ** 2 + 4 * w[1] ** 2).backward()
    assert sam.first_step()
    assert w.detach().tolist() == pytest.approx([3.6, 1.8])
    sam.restore()
    assert w.detach().tolist() == pytest.approx([3.0, 1.0])


def valley(w: torch.Tensor) -> torch.Tensor:
    """f(x, y) = (1 + x^2) y^2 / 2: a line of minima (y = 0) whose sharpness, the curvature across it, is 1 + x^2."""
    return 0.5 * (1 + w[0] ** 2) * w[1] ** 2


@pytest.mark.parametrize("sharpness_aware", [False, True])
def test_sam_walks_to_the_flattest_minimum_that_gradient_descent_does_not_seek(sharpness_aware: bool) -> None:
    w = torch.nn.Parameter(torch.tensor([2.0, 1.0]))
    base = torch.optim.SGD([w], lr=0.05)
    optimizer = SAM(base, rho=0.2) if sharpness_aware else base

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = valley(w)
        loss.backward()
        return loss

    for _ in range(5000):
        if sharpness_aware:
            optimizer.step(closure)
        else:
            closure()
            optimizer.step()
    x, y = w.detach().tolist()
    assert abs(y) < 0.05  # both end in the valley
    sharpness = 1 + x**2
    if sharpness_aware:
        assert sharpness == pytest.approx(1.0, abs=0.01)  # the flattest point of the valley
    else:
        assert sharpness > 4.0  # where the descent met the valley: x barely moved from 2


def test_alternating_sam_descends_from_the_ascent_and_holds_it_between_calls() -> None:
    w = torch.nn.Parameter(torch.tensor([2.0]))
    sam = AlternatingSAM(torch.optim.SGD([w], lr=0.1), rho=0.5)
    (1.5 * w**2).sum().backward()
    sam.step()  # ascent: w + e
    assert float(w) == pytest.approx(2.5) and sam.perturbed
    sam.hold()  # between SB3's train calls: the weights themselves
    assert float(w) == pytest.approx(2.0)
    sam.resume()
    sam.zero_grad()
    (1.5 * w**2).sum().backward()  # the gradient at the ascent, 7.5
    sam.step()
    assert float(w) == pytest.approx(1.25) and sam.updates == 1 and not sam.perturbed


def test_recipe_names_and_settings() -> None:
    assert parse_recipe("noise+distill").name == "distill+noise"
    assert parse_recipe("distill", {"distill": {"margin": 1.0}}).part("distill").margin == 1.0
    with pytest.raises(QuarlError, match="unknown recipe 'distil': expected one of distill, sam, noise"):
        parse_recipe("distil")
    with pytest.raises(QuarlError, match="unknown distill setting 'rate': expected one of"):
        parse_recipe("distill", {"distill": {"rate": 1}})
    with pytest.raises(QuarlError, match="bad settings for 'sam'"):
        parse_recipe("distill", {"sam": {"rho": 0.1}})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a small DQN zip trained here on CartPole (no config.yml: rl-zoo3's 50000 steps are its zoo
    budget) and a torch-module policy file."""
    from stable_baselines3 import DQN

    folder = tmp_path_factory.mktemp("tiny")
    model = DQN("MlpPolicy", "CartPole-v1", learning_starts=100, policy_kwargs={"net_arch": [32]}, seed=0, device="cpu")
    model.learn(600)
    model.save(folder / "dqn_cartpole.zip")
    (folder / "tiny_policy.py").write_text(textwrap.dedent(TINY_POLICY))
    return folder


def refused(cli, tmp_path: Path, *args: str) -> str:
    store = tmp_path / "bad.sqlite"
    code, out, err = cli("harden", *args, "--store", store)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert not store.exists() or pd.read_sql("SELECT * FROM hardened", f"sqlite:///{store}").empty
    return err


def test_bad_input_is_one_line_and_writes_nothing(cli, tiny: Path, tmp_path: Path) -> None:
    agent = ("--model", str(tiny / "dqn_cartpole.zip"), "--env", "CartPole-v1")
    out = tmp_path / "hard.zip"
    target = ("--bits", "4", "--granularity", "per-channel", "--out", str(out))
    assert "bad target spec fp32: expected a spec narrower than fp32" in refused(
        cli, tmp_path, *agent, "--bits", "32", "--out", str(out)
    )
    assert "bad --budget 0: expected env steps >= 1" in refused(cli, tmp_path, *agent, *target, "--budget", "0")
    assert "expected at most the zoo's 50000 training steps for dqn/CartPole-v1" in refused(
        cli, tmp_path, *agent, *target, "--budget", "50001"
    )
    assert "unknown recipe 'sharp': expected one of distill, sam, noise" in refused(
        cli, tmp_path, *agent, *target, "--recipe", "sharp"
    )
    module = ("--policy-module", f"{tiny / 'tiny_policy.py'}:policy", "--env", "CartPole-v1")
    assert "recipe 'sam' trains with the RL algorithm's loss, and a torch-module or ONNX policy has none" in refused(
        cli, tmp_path, *module, "--bits", "4", "--recipe", "sam", "--budget", "100", "--out", str(tmp_path / "m.onnx")
    )
    assert "bad --out" in refused(cli, tmp_path, *agent, "--bits", "4", "--out", str(tmp_path / "hard.onnx"))
    out.write_bytes(b"taken")
    assert "exists: pass --force" in refused(cli, tmp_path, *agent, *target)
    assert out.read_bytes() == b"taken" and not out.with_suffix("").exists()


def test_a_users_zip_fine_tuned_with_sam_is_an_agent_like_any_other(cli, tiny: Path, tmp_path: Path) -> None:
    from quarl_bench.api import AgentQuery, resolve

    store, out = tmp_path / "s.sqlite", tmp_path / "sam.zip"
    agent = ("--model", str(tiny / "dqn_cartpole.zip"), "--env", "CartPole-v1")
    code, text, err = cli(
        "harden", *agent, "--bits", "4", "--recipe", "sam", "--budget", "600", "--out", out, "--store", store
    )
    assert code == 0, err
    record = json.loads((tmp_path / "sam" / "harden.json").read_text())
    parent = resolve(AgentQuery("CartPole-v1", model=str(tiny / "dqn_cartpole.zip")))
    assert record["parent"]["content_hash"] == parent.content_hash
    assert record["recipe"] == {"name": "sam", "settings": {"sam": {"rho": 0.05, "learning_rate_scale": 0.01}}}
    assert record["budget"] == 600 and record["env_steps"] >= 600 and record["gradient_steps"] > 0
    row = pd.read_sql("SELECT * FROM hardened", f"sqlite:///{store}").iloc[0]
    assert row["parent_hash"] == parent.content_hash and row["recipe"] == "sam"
    assert row["agent_hash"] == resolve(AgentQuery("CartPole-v1", model=str(out))).content_hash
    code, _, err = cli("run", "--model", out, "--env", "CartPole-v1", "--bits", "8", "-n", "3", "--store", store)
    assert code == 0, err
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report")  # uncertified: a line, no verdict
    assert code == 0, err
    line = pd.read_csv(tmp_path / "report" / "hardened_agents.csv").iloc[0]
    assert (line["recipe"], line["int before"], line["int after"]) == ("sam", "-", "-")


def test_a_torch_module_is_distilled_into_an_onnx_policy(cli, tiny: Path, tmp_path: Path) -> None:
    from quarl_bench.store.results import load_results

    store, out = tmp_path / "s.sqlite", tmp_path / "module.onnx"
    module = ("--policy-module", f"{tiny / 'tiny_policy.py'}:policy", "--env", "CartPole-v1")
    small = ("--bits", "4", "--budget", "400", "--store", store)
    code, _, err = cli("harden", *module, *small, "--granularity", "per-channel", "--out", out)
    assert code == 0, err
    assert out.is_file() and (tmp_path / "module" / "harden.json").is_file()
    code, _, err = cli("run", "--model", out, "--env", "CartPole-v1", "--bits", "32", "-n", "5", "--store", store)
    assert code == 0, err
    assert set(load_results(store)["algo"]) == {"onnx"}
    # the same hardened weights as a torch module reach the backends that need torch: here c-int4
    torch_module = ("--policy-module", f"{tmp_path / 'module' / 'module.py'}:make", "--env", "CartPole-v1")
    code, _, err = cli("run", *torch_module, "--bits", "32", "-n", "5", "--store", store)
    assert code == 0, err
    onnx_fp32, module_fp32 = load_results(store).sort_values("algo")["mean_reward"].tolist()
    assert module_fp32 == onnx_fp32  # the ONNX graph and the module act alike on the same seeded episodes
    artifact = tmp_path / "c4"
    lenient = ("--tolerance-abs", "50", "--catastrophe", "500", "--allow-degraded", "--allow-divergent")
    code, _, err = cli(
        "export",
        *torch_module,
        "--backend",
        "c-int4",
        "--out",
        artifact,
        "--max-episodes",
        "20",
        *lenient,
        "--store",
        store,
    )
    assert code == 0, err
    assert (artifact / "policy.c").is_file()
    # the hardened ONNX graph is one MLP chain: read back as torch, it reaches c-int4 too, with the same C
    from_graph = ("--model", out, "--env", "CartPole-v1", "--backend", "c-int4", "--out", tmp_path / "c4-onnx")
    code, _, err = cli("export", *from_graph, "--max-episodes", "20", *lenient, "--store", store)
    assert code == 0, err
    assert (tmp_path / "c4-onnx" / "policy.c").read_bytes() == (artifact / "policy.c").read_bytes()
    # an ONNX policy that is one chain is distilled through its torch twin, into an ONNX graph alone
    again = tmp_path / "again.onnx"
    code, _, err = cli("harden", "--model", out, "--env", "CartPole-v1", *small, "--out", again)
    assert code == 0, err
    assert again.is_file() and (tmp_path / "again" / "harden.json").is_file()
    assert not (tmp_path / "again" / "module.py").exists()
    residual = tmp_path / "residual.onnx"
    torch.onnx.export(
        Residual(), (torch.zeros(1, 4),), str(residual), input_names=["x"], dynamic_axes={"x": {0: "b"}}, dynamo=False
    )
    graph = ("--model", str(residual), "--env", "CartPole-v1", "--bits", "4", "--out", str(tmp_path / "r.onnx"))
    err = refused(cli, tmp_path, *graph, "--budget", "100")
    assert "played as its own graph" in err and "does not continue one chain" in err


class Residual(torch.nn.Module):
    """A network that is no chain: CartPole's 4 observations plus a layer of them, and two logits of that."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x + self.hidden(x))


@pytest.mark.heavy  # 33 s; harden --certify runs in test_doc_commands
@pytest.mark.slow
def test_zoo_dqn_cartpole_hardened_for_int4_is_certified_against_its_parent(cli, zoo: Path, tmp_path: Path) -> None:
    """The zoo's dqn CartPole: certified safe at int6 per channel, not at int5 (its median decision margin, 0.14, is
    below what int4 rounding moves its Q-values, 6.9); distilled with margins, int4 per channel is certified safe
    against the ORIGINAL agent's fp32, and the hardened fp32 is certified not worse."""
    store, out, report = tmp_path / "s.sqlite", tmp_path / "dqn_int4.zip", tmp_path / "report"
    agent = ("--algo", "dqn", "--env", "CartPole-v1", "-f", zoo)
    code, text, err = cli(
        "harden",
        *agent,
        "--bits",
        "4",
        "--granularity",
        "per-channel",
        "--recipe",
        "distill",
        "--out",
        out,
        "--certify",
        "--max-episodes",
        "200",
        "--store",
        store,
    )
    assert code == 0, err
    verdicts = pd.read_sql("SELECT spec, verdict, agent_hash, settings FROM verdicts", f"sqlite:///{store}")
    hardened = pd.read_sql("SELECT * FROM hardened", f"sqlite:///{store}").iloc[0]
    parent = verdicts[verdicts["agent_hash"] == hardened["parent_hash"]].set_index("spec")["verdict"]
    child = verdicts[verdicts["agent_hash"] == hardened["agent_hash"]]
    assert all(json.loads(s)["baseline"] == hardened["parent_hash"] for s in child["settings"])
    child = child.set_index("spec")["verdict"]
    assert parent["int6 per-channel"] == "safe" and parent["int5 per-channel"] == "unsafe"
    assert child["fp32"] == "safe" and child["int4 per-channel"] == "safe"
    assert set(child) == {"safe"}
    before, after = (json.loads(hardened[k])["margins"]["margin_median"] for k in ("before", "after"))
    assert after > 5 * before
    # the hardened zip is an agent like any other
    code, _, err = cli(
        "certify",
        "--model",
        out,
        "--env",
        "CartPole-v1",
        "--bits",
        "4",
        "--granularity",
        "per-channel",
        "--max-episodes",
        "200",
        "--store",
        store,
    )
    assert code == 0, err
    # against the parent, every per-channel width safe: the minimum is the per-channel ladder's, not fp32's
    code, out_json, err = cli(
        "certify",
        "--model",
        out,
        "--env",
        "CartPole-v1",
        "--against-parent",
        "--granularity",
        "per-channel",
        "--bits",
        "8",
        "4",
        "--max-episodes",
        "200",
        "--store",
        store,
        "--json",
    )
    assert code == 0, err
    answer = json.loads(out_json)
    assert answer["families"] == {"fp32": "fp32", "int per-channel": "int4 per-channel"}
    assert answer["minimum_safe"] == "int4 per-channel"
    code, _, err = cli("report", "--store", store, "--out", report, "--html")
    assert code == 0, err
    table = pd.read_csv(report / "hardened_agents.csv")
    assert len(table) == 1 and table.loc[0, "recipe"] == "distill"
    assert (
        table.loc[0, "parent hash"] == hardened["parent_hash"] and table.loc[0, "agent hash"] == hardened["agent_hash"]
    )
    assert table.loc[0, "int per-channel before"] == "int6" and table.loc[0, "int per-channel after"] == "≤ int4"
    assert table.loc[0, "parent"].startswith("dqn/CartPole-v1")
    page = (report / "report.html").read_text()
    assert "Hardened agents" in page and "hardened_widths" in page
    certified = pd.read_csv(report / "certified_verdicts.csv")  # certify's own verdicts; not those against a parent
    assert sorted(certified["agent"].str.contains("dqn_int4.zip")) == [False, True]
    assert certified.set_index(certified["agent"].str.contains("dqn_int4.zip")).loc[True, "int4"].startswith("safe")


def test_against_a_parent_the_minimum_is_the_quantized_ladder_s_not_fp32_s() -> None:
    from quarl_bench.certify.result import Certification, Verdict
    from quarl_bench.types import AgentRef

    ref = AgentRef("dqn", "CartPole-v1", "CartPole-v1", "model", "/hard.zip", "0" * 16)
    found = [
        Verdict(p, name, "safe", 100, 0.0, -1.0, 1.0, 24.0, 0.05)
        for p, name in (("fp32", "fp32"), ("int8", "int8 per-channel"), ("int4", "int4 per-channel"))
    ]
    walks = {"fp32": "fp32", "int8 per-channel": "int per-channel", "int4 per-channel": "int per-channel"}
    result = Certification(ref, 24.0, "5%", (), found, walks)
    assert result.minimum_safe == "int4 per-channel" and result.minimum_safe_text == "≤ int4 per-channel"
    assert result.as_json()["families"] == {"fp32": "fp32", "int per-channel": "int4 per-channel"}


def test_hardening_keys_are_pinned() -> None:
    """The store's key of a hardening: a new setting at its default (epoch_states) leaves stored keys as they were."""
    from quarl_bench.methods.harden import HardenConfig
    from quarl_bench.types import AgentRef, QuantSpec

    ref = AgentRef("dqn", "CartPole-v1", "CartPole-v1", "folder", "/zoo/dqn/CartPole-v1_1", "2472643f427de863")
    w4 = QuantSpec("int4", "per-channel")
    w4a8 = QuantSpec("int4", "per-channel", act_bits="int8", calibration_states=1000, calibration_method="minmax")
    assert HardenConfig(ref, w4, parse_recipe("distill"), 5000).key == "19e24a5ace2f1acca9625226"
    assert HardenConfig(ref, w4a8, parse_recipe("sam"), 5000).key == "56a1d0f18c15188abfd5961b"
    wider = parse_recipe("distill", {"distill": {"epoch_states": 5000}})
    assert HardenConfig(ref, w4, wider, 5000).key != "19e24a5ace2f1acca9625226"
    assert HardenConfig(ref, w4, parse_recipe("distill"), 5000, out="elsewhere.zip").key == "19e24a5ace2f1acca9625226"


def test_against_parent_needs_a_hardened_agent(cli, tiny: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    agent = ("--model", str(tiny / "dqn_cartpole.zip"), "--env", "CartPole-v1")
    code, _, err = cli("certify", *agent, "--bits", "8", "--against-parent", "--store", store)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "has no harden.json beside it: expected an agent written by quarl-bench harden" in err


def test_the_width_figure_draws_lines_missing_a_side() -> None:
    """A hardened agent certified with other settings than its parent has no "before" in its line (NaN)."""
    import matplotlib

    matplotlib.use("Agg")
    from quarl_bench.report.hardened import draw_width_changes, width_bits

    assert [width_bits(t) for t in ("int5", "≤ int4", "> int8")] == [5, 4, 9] and np.isnan(width_bits("-"))
    widths = pd.DataFrame(
        {
            "agent": ["a", "a", "b"],
            "recipe": ["distill", "sam", "distill"],
            "before": [np.nan, 6, 8],
            "after": [4, np.nan, 8],
        }
    )
    figure = draw_width_changes(widths)
    figure.savefig(io.BytesIO(), format="png")  # matplotlib drew an arrow from NaN before (StopIteration)
    assert len(figure.axes[0].texts) == 0  # no arrow: one line lacks a side, the other did not move


def test_the_hardened_table_prints_a_dash_where_a_figure_is_missing() -> None:
    """A per-tensor hardening has no ladder figures: the console shows '-', never Python's None or nan."""
    from rich.console import Console

    from quarl_bench.report.console_harden import study_table

    frame = pd.DataFrame(
        [
            {
                "parent": "dqn CartPole",
                "recipe": "distill",
                "env steps": 5000,
                "fine-tune s": None,
                "before": float("nan"),
                "ladder": "int per-tensor",
                "int per-tensor before": None,
                "int per-tensor after": "int4 S",
            }
        ]
    )
    console = Console(record=True, width=200)
    console.print(study_table(frame))
    text = console.export_text()
    assert "None" not in text and "nan" not in text and "int4 S" in text and " - " in text
