"""Action-chunking (ACT-shaped) policies: a chunk executed open-loop or temporally ensembled, their state reset per
episode, played, paired and certified from the CLI like any module; bad chunk shapes refused in one line."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.chunked import ChunkedModulePolicy, ChunkShape

DATA = Path(__file__).parent / "data"
BOX = spaces.Box(-10.0, 10.0, (1,), np.float32)
ACTIONS = spaces.Box(-100.0, 100.0, (1,), np.float32)

# (position, target) -> a chunk of 4 equal pushes toward the target: 10 x the distance, clipped by the env
CHUNKED_REACH = """import torch


def make():
    net = torch.nn.Linear(2, 4)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[-10.0, 10.0]] * 4))
        net.bias.zero_()
    net.action_chunk = {"size": 4, "execute": 2}
    return net


def ensembled():
    net = make()
    net.action_chunk = {"size": 4, "ensemble": 0.1}
    return net


def wrong():
    net = torch.nn.Linear(2, 3)
    net.action_chunk = {"size": 4, "execute": 2}
    return net
"""


class Echo(torch.nn.Module):
    """A chunk whose j-th action is the observation plus ``step * j``, and a count of the calls."""

    def __init__(self, size: int, step: float) -> None:
        super().__init__()
        self.size, self.step, self.calls = size, step, 0

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return observation[:, :1] + self.step * torch.arange(self.size, dtype=torch.float32)[None, :]


def _play(policy: ChunkedModulePolicy, observations: list[float], starts: list[bool]) -> list[float]:
    state, played = None, []
    for value, start in zip(observations, starts, strict=True):
        actions, state = policy.predict(np.array([[value]], np.float32), state, np.array([start]))
        played.append(float(actions[0, 0]))
    return played


def test_an_open_loop_chunk_plays_its_first_actions_then_asks_again_and_a_new_episode_asks_at_once() -> None:
    module = Echo(4, 1.0)
    policy = ChunkedModulePolicy(BOX, ACTIONS, module, ChunkShape(4, execute=3))
    played = _play(policy, [0, 10, 20, 30, 40, 50, 60], [True, False, False, False, False, True, False])
    # chunk from 0: 0, 1, 2; from 30: 30, 31, then a new episode at 50: 50, 51
    assert played == [0, 1, 2, 30, 31, 50, 51]
    assert module.calls == 3


def test_the_temporal_ensemble_weighs_the_oldest_prediction_most() -> None:
    """ACT's w_i = exp(-m i), i = 0 the oldest: with every chunk constant (each predicts its own observation) and
    m = ln 2, three chunks held give (1 x oldest + 1/2 x middle + 1/4 x newest) / 1.75."""
    policy = ChunkedModulePolicy(BOX, ACTIONS, Echo(3, 0.0), ChunkShape(3, ensemble=math.log(2)))
    played = _play(policy, [0, 4, 8, 12, 100], [True, False, False, False, True])
    assert played[0] == 0
    assert played[1] == pytest.approx((0 + 0.5 * 4) / 1.5)
    assert played[2] == pytest.approx((0 + 0.5 * 4 + 0.25 * 8) / 1.75)
    assert played[3] == pytest.approx((4 + 0.5 * 8 + 0.25 * 12) / 1.75)  # the chunk from 0 has run out
    assert played[4] == 100  # a new episode holds no old chunk
    consistent = ChunkedModulePolicy(BOX, ACTIONS, Echo(3, 1.0), ChunkShape(3, ensemble=0.5))
    assert _play(consistent, [0, 1, 2, 3], [True, False, False, False]) == pytest.approx([0, 1, 2, 3])


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"size": 4, "execute": 5}, "bad action_chunk execute 5"),
        ({"size": 0, "execute": 1}, "bad action_chunk size 0"),
        ({"size": 4}, "expected {'size': K, 'execute': N}"),
        ({"size": 4, "ensemble": -1}, "bad action_chunk ensemble -1"),
    ],
)
def test_a_bad_declaration_names_what_is_accepted(declaration: dict, message: str) -> None:
    with pytest.raises(QuarlError, match=message.replace("{", r"\{").replace("}", r"\}")):
        ChunkShape.declared(declaration, "policy.py:make")


def test_a_chunked_reach_is_certified_from_the_cli_and_its_chunk_shape_is_checked(cli, tmp_path: Path) -> None:
    sys.path.insert(0, str(DATA))
    (tmp_path / "reach.py").write_text(CHUNKED_REACH)
    store = tmp_path / "q.sqlite"
    env = ("--env", "ReachLineContinuous-v0", "--env-package", "reach_line")
    for function in ("make", "ensembled"):
        agent = ("--policy-module", f"{tmp_path / 'reach.py'}:{function}", *env)
        flags = ("--bits", "8", "--outcome", "success", "--tolerance-abs", "0.1", "--store", store)
        code, out, err = cli("certify", *agent, *flags)
        assert code == 0, err
        said = " ".join(out.split())
        assert "int8: safe" in said and "fp32 40/40" in said and "quantized 40/40" in said, out
        shape = "chunk 4, 2 executed" if function == "make" else "chunk 4, ensembled (m 0.1)"
        assert f"reach.py:{function}; {shape}" in said  # the agent line names its chunk
        code, out, err = cli("certify", *agent, *flags, "--json")
        assert json.loads(out.splitlines()[-1])["verdicts"][0]["policy_shape"] == shape, out
    code, _, err = cli("certify", "--policy-module", f"{tmp_path / 'reach.py'}:wrong", *env, "--bits", "8")
    assert code == 2 and "bad action chunk: the module returned shape (2, 3)" in err
    assert len(err.strip().splitlines()) == 1
    agent = ("--policy-module", f"{tmp_path / 'reach.py'}:make", *env)
    code, _, err = cli("export", *agent, "--backend", "ort-int8-static", "--out", tmp_path / "art")
    assert code == 2 and "cannot play a chunk policy" in err and not (tmp_path / "art").exists()
