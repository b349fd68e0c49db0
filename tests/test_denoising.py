"""Denoising (Diffusion-Policy-shaped) policies: diffusers' DDIM/DDPM loop from each episode's own noise, so that
fp32 and a quantized copy of a pair draw the same noise; certified from the CLI with the shape named; bad
declarations refused in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from quarl_bench.errors import QuarlError
from quarl_bench.zoo.chunk_policies import chunked_policy, declared_chunk
from quarl_bench.zoo.denoising import DenoisingShape

DATA = Path(__file__).parent / "data"
BOX = spaces.Box(-1.0, 1.0, (2,), np.float32)
ACTIONS = spaces.Box(-2.0, 2.0, (1,), np.float32)
DECLARED = {"size": 3, "execute": 2, "scheduler": "ddpm", "steps": 8}


class Drift(torch.nn.Module):
    """Predicts x0 as half the noisy chunk: the final chunk is the noise's own, so it shows which noise was drawn."""

    denoising = DECLARED | {"prediction": "sample"}

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor, observation: torch.Tensor) -> torch.Tensor:
        return 0.5 * sample


def _episode(policy, first: np.ndarray, steps: int) -> list[float]:
    state, played = None, []
    for step in range(steps):
        observation = first if step == 0 else first + 0.01 * step
        actions, state = policy.predict(observation[None], state, np.array([step == 0]))
        played.append(float(actions[0, 0]))
    return played


def test_an_episode_draws_its_own_noise_and_replays_it_from_the_same_start() -> None:
    policy = chunked_policy(BOX, ACTIONS, Drift(), declared_chunk(Drift(), "drift"))
    start, other = np.array([0.1, 0.2], np.float32), np.array([0.3, 0.2], np.float32)
    first = _episode(policy, start, 6)
    assert _episode(policy, start, 6) == first  # a paired episode: the same start, the same noise
    twin = chunked_policy(BOX, ACTIONS, Drift(), declared_chunk(Drift(), "drift"))
    assert _episode(twin, start, 6) == first  # another copy (the quantized one) draws it too
    assert _episode(policy, other, 6) != first  # another episode, other noise
    assert len(set(first[::2])) == 3  # each chunk (2 executed of 3) draws afresh within the episode


def test_an_oracle_denoiser_gives_its_clean_chunk_under_ddim_and_ddpm() -> None:
    sys.path.insert(0, str(DATA))
    import denoise_reach

    reach_box = spaces.Box(-1.0, 1.0, (1,), np.float32)
    observation = torch.tensor([[0.0, 0.05], [0.2, -0.5]])
    for module in (denoise_reach.ddim(), denoise_reach.ddpm()):
        policy = chunked_policy(BOX, reach_box, module, declared_chunk(module, "oracle"))
        with torch.no_grad():
            chunks = policy.chunks(observation).numpy()[..., 0]
        assert np.allclose(chunks, [[0.5] * 4, [-1.0] * 4], atol=1e-4), (module.denoising, chunks)


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        (DECLARED | {"scheduler": "euler"}, "unknown denoising scheduler 'euler' of m.py:f: expected one of"),
        (DECLARED | {"steps": 0}, "bad denoising steps 0 of m.py:f: expected 1 <= steps <= train_steps 100"),
        (DECLARED | {"prediction": "v"}, "bad denoising prediction 'v' of m.py:f"),
        ({"size": 3, "scheduler": "ddim", "steps": 8}, "bad denoising"),
        (DECLARED | {"execute": 4}, "bad action_chunk execute 4"),
    ],
)
def test_a_bad_denoising_declaration_names_what_is_accepted(declaration: dict, message: str) -> None:
    with pytest.raises(QuarlError, match=message.replace("(", r"\(").replace(")", r"\)")):
        DenoisingShape.declared(declaration, "m.py:f")


def test_a_denoising_reach_is_certified_from_the_cli_and_names_its_scheduler(cli, tmp_path: Path) -> None:
    sys.path.insert(0, str(DATA))
    store, env = tmp_path / "q.sqlite", ("--env", "ReachLineContinuous-v0", "--env-package", "reach_line")
    agent = ("--policy-module", f"{DATA / 'denoise_reach.py'}:ddim", *env)
    flags = ("--bits", "8", "4", "--outcome", "success", "--tolerance-abs", "0.1", "--store", store)
    code, out, err = cli("certify", *agent, *flags, "--json")
    assert code == 0, err
    verdicts = json.loads(out.splitlines()[-1])["verdicts"]
    assert [v["verdict"] for v in verdicts] == ["safe", "safe"], out
    assert {v["policy_shape"] for v in verdicts} == {"chunk 4, 2 executed; ddim 10 steps (epsilon, 100 trained)"}


def test_the_chunk_policies_train_from_an_expert_and_certify_on_success(cli, tmp_path: Path) -> None:
    """scripts/train_chunk_policies.py's path, tiny: demonstrations from the reach's exact expert, an ACT-style
    transformer and a Diffusion Policy trained on them, loaded through their ``policy.py`` and certified."""
    import importlib.util

    sys.path.insert(0, str(DATA))
    import reach_line  # noqa: F401  (registers ReachLineContinuous-v0)

    spec = importlib.util.spec_from_file_location(
        "train_chunks", DATA.parent.parent / "scripts/train_chunk_policies.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    expert = lambda observation: np.clip(10 * (observation[1:] - observation[:1]), -1, 1)  # noqa: E731
    script.train(expert, "ReachLineContinuous-v0", tmp_path, episodes=20, size=4, execute=2, steps=150, seed=0)
    store, env = tmp_path / "q.sqlite", ("--env", "ReachLineContinuous-v0", "--env-package", "reach_line")
    learned = {"act": 18, "diffusion": 10}  # of 20 fp32 episodes, after 150 steps (20 and 14 measured)
    for kind, shape in (("act", "chunk 4, 2 executed"), ("diffusion", "ddim 10 steps (epsilon, 100 trained)")):
        agent = ("--policy-module", f"{tmp_path / 'policy.py'}:{kind}", *env)
        flags = ("--bits", "8", "--outcome", "success", "--tolerance-abs", "0.2", "--max-episodes", "20")
        code, out, err = cli("certify", *agent, *flags, "--store", store, "--json")
        assert code == 0, err
        verdict = json.loads(out.splitlines()[-1])["verdicts"][0]
        assert shape in verdict["policy_shape"], verdict
        assert verdict["reference_successes"] >= learned[kind] and verdict["outcome_pairs"] == 20, verdict
