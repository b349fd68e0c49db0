"""Every ``quarl-bench`` command written in the README, the docs and the grids' YAML comments parses with today's
flags, names grids that resolve from any folder, and (all but the training and cluster ones) runs as written from a
folder outside the checkout, with only the episode and timestep counts made tiny. The user's files the docs name
(``my_agent.zip``, ``my_pkg``, ``policy.onnx``, ``cleanrl_agent.py``, ``robot_runs.csv``, the zoo folder) are made
there first."""

from __future__ import annotations

import re
import shlex
import textwrap
from pathlib import Path

import pytest

from quarl_bench.cli import build_parser
from quarl_bench.config import grid_file

ROOT = Path(__file__).resolve().parents[1]
# plugins.md's commands take the example plugin's names: tests/test_plugins.py runs them where it is installed
NEEDS_PLUGIN = ("plugins.md",)
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in NEEDS_PLUGIN)]
GRIDS = sorted((ROOT / "quarl_bench" / "zoo_configs").glob("*.yaml"))
LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)#\s]+)")

# training, cluster and timing commands are parsed, not run: each takes minutes, and other tests run them
NOT_RUN = ("actorq", "amp", "qat", "train", "table4", "record")  # record: a zoo's worth (tests/test_record.py)
# PandaReach, FetchReach: their agents are trained first (3 and 7 minutes; tests/test_outcomes.py trains a short
# PandaReach one and certifies it, tests/test_robotics_envs.py plays FetchReach under its perturbations)
NOT_RUN_FLAGS = (
    "--executor",
    "--grid certify_methods",
    "--grid harden",
    "mujoco",
    "qat",
    "--train-if-missing",
    "PandaReach",
    "FetchReach",
)
# sweeps of the big grids are parsed, not run (hundreds of jobs even at 2 episodes); smoke stands for them
RUN_SWEEPS = ("smoke",)
# per command: the flags that make it tiny (later flags win in argparse)
TINY = {
    "run": ["-n", "2"],
    "sensitivity": ["-n", "2"],
    "fidelity": ["-n", "2"],
    "deploy": ["-n", "2", "--backend", "ort-fp32", "ort-int8-dynamic"],
    "mixed": ["-n", "2", "--bits", "8", "4", "--max-episodes", "20", "--search-seeds", "0", "--verify-seeds", "1"],
    "certify": ["--batch", "5", "--max-episodes", "5", "--bits", "fp16", "8", "2"],
    "sweep": ["-n", "2", "--env", "CartPole-v1"],
    "method": ["--episodes", "2"],
    "reproduce": ["--plan"],  # the plan of each written reproduction (running one takes minutes to hours)
    "harden": ["--max-episodes", "20", "--budget", "500"],  # the path, not the default 5000 states
    # LunarLander's asymptotic sequence decides nothing before 100 pairs; a fixed δ and catastrophe threshold skip
    # the scale set (300 random episodes), and let the 500-state hardened agent's export run though it loses to fp32
    "export": ["--max-episodes", "20", "--tolerance-abs", "100", "--catastrophe", "250"],
    "rollout": [
        "--timesteps",
        "256",
        "--episodes",
        "2",
        "--seeds",
        "0",
        "--rollout-precision",
        "int4",
        "--env",
        "CartPole",
    ],
}

MY_PKG = """
import gymnasium as gym

gym.register("MyEnv-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv", max_episode_steps=50)
"""
CLEANRL = """
from torch import nn


def make_actor():
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
"""


def written_commands() -> list[tuple[str, str]]:
    """(source file, command) for every ``quarl-bench`` command in fenced blocks, inline code and YAML comments;
    ``[optional flags]`` dropped and ``a|b`` alternatives read as ``a``. A bare ``quarl-bench NAME`` in prose is
    a mention of the command, kept to check the name."""
    found: list[tuple[str, str]] = []
    for path in [*DOCS, *GRIDS]:
        lines = path.read_text().splitlines()
        if path.suffix == ".yaml":
            text = [line.lstrip().lstrip("#").strip() for line in lines if line.lstrip().startswith("#")]
            found += [(path.name, m.group(0)) for line in text for m in re.finditer(r"quarl-bench [^`#]*", line)]
            continue
        fenced = False
        for line in lines:
            if line.startswith("```"):
                fenced = not fenced
            elif fenced and line.strip().removeprefix(".venv/bin/").startswith("quarl-bench "):
                found.append((path.name, line.strip().removeprefix(".venv/bin/").split(" # ")[0]))
            elif not fenced:
                found += [(path.name, m.group(1)) for m in re.finditer(r"`(?:\.venv/bin/)?(quarl-bench [^`]*)`", line)]
    return list(dict.fromkeys((source, clean(command)) for source, command in found))


def clean(command: str) -> str:
    previous = None
    while previous != command:
        previous, command = command, re.sub(r"\[[^\[\]]*\]", "", command)
    command = re.sub(r"(\S+?)\|\S+", r"\1", command)
    return " ".join(command.split())


COMMANDS = written_commands()


def arguments(command: str) -> list[str]:
    return shlex.split(command)[1:]


def test_the_docs_write_many_commands_and_name_no_missing_page() -> None:
    assert len(COMMANDS) > 60  # the extraction finds them
    assert "../shared" not in (ROOT / "README.md").read_text()  # a reader has no such neighbour folder
    for path in DOCS:
        for target in LINK.findall(path.read_text()):
            assert (path.parent / target).exists(), f"{path.name} links {target}, which is not in the repository"


def test_the_committed_command_reference_is_the_parsers() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    committed = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert committed == hooks.reference_markdown(), "run: python scripts/mkdocs_hooks.py"


@pytest.mark.parametrize(("source", "command"), COMMANDS, ids=[f"{s}: {c}"[:90] for s, c in COMMANDS])
def test_every_written_command_parses_and_its_grid_resolves(source: str, command: str) -> None:
    args = arguments(command)
    names = set(build_parser()._subparsers._group_actions[0].choices)
    if args == ["--version"]:  # the one top-level option
        return
    assert args and args[0] in names, f"{source}: {command!r} names no command"
    if len(args) == 1 or "..." in args:  # a mention in prose, or an elided example
        return
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit:
        pytest.fail(f"{source}: {command!r} does not parse")
    grid = getattr(parsed, "grid", None)
    if isinstance(grid, str | Path):
        assert grid_file(grid).is_file(), f"{source}: {command!r} names grid {grid}, which does not resolve"


def runnable(command: str) -> bool:
    args = arguments(command)
    if len(args) == 1 and args[0] not in ("report", "results") or "..." in args or args[0] in NOT_RUN:
        return False
    if any(flag in command for flag in NOT_RUN_FLAGS):
        return False
    return args[0] != "sweep" or any(name in command for name in RUN_SWEEPS)


def parsed_meaning(command: str) -> dict[str, object]:
    """What argparse makes of a command, paths normalised: ``report --out results/`` is ``report``."""
    from quarl_bench.store import DEFAULT_STORE

    parsed = vars(build_parser().parse_args(arguments(command)))
    parsed["store"] = parsed.get("store") or DEFAULT_STORE
    parsed.pop("handler")  # a function made afresh by each parser
    return {name: str(Path(value)) if isinstance(value, str | Path) else value for name, value in parsed.items()}


def test_the_written_commands_run_from_a_folder_of_their_own(cli, zoo: Path, tmp_path: Path, monkeypatch) -> None:
    from stable_baselines3 import PPO

    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "zoo").symlink_to(zoo)
    work = tmp_path / "work"
    work.mkdir()
    (work / "rl-trained-agents").symlink_to(zoo)  # the README's `git clone` of the zoo
    monkeypatch.chdir(work)
    monkeypatch.setenv("QUARL_ZOO", str(zoo))  # the machine's zoo, for commands that name no --folder
    (work / "my_pkg.py").write_text(textwrap.dedent(MY_PKG))
    (work / "cleanrl_agent.py").write_text(textwrap.dedent(CLEANRL))
    PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu").save(work / "my_agent.zip")
    code, _, err = cli(
        "export", "--model", "my_agent.zip", "--env", "CartPole-v1", "--backend", "ort-fp32", "--out", "exported"
    )
    assert code == 0, err
    (work / "policy.onnx").write_bytes((work / "exported" / "policy.onnx").read_bytes())  # "your ONNX file"
    runs = "".join(f"{n},fp32,1\n{n},int8,1\n" for n in range(60))  # "a robot's trials", as the README records them
    (work / "robot_runs.csv").write_text("trial,policy,outcome\n" + runs)
    ran, meanings = [], []
    order = sorted(COMMANDS, key=lambda found: arguments(found[1])[0] in ("report", "results"))  # reports last
    for source, command in order:
        if not runnable(command) or (meaning := parsed_meaning(command)) in meanings:  # each distinct one once
            continue
        args = arguments(command)
        code, out, err = cli(*args, *TINY.get(args[0], []))
        assert code == 0, f"{source}: {command!r} failed from {work}: {err.strip().splitlines()[-1:]}"
        ran.append(command)
        meanings.append(meaning)
    assert len(ran) >= 25, ran


def test_the_readme_python_snippet_prints_readable_numbers(tmp_path: Path, monkeypatch) -> None:
    """The README's "From Python" block, run as written next to a PPO zip: flat columns, every value printed."""
    import contextlib
    import io

    from stable_baselines3 import PPO

    block = re.search(r"## From Python\s+```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu", n_steps=256).learn(3000).save(tmp_path / "my_agent.zip")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.group(1), "README.md", "exec"), {})
    text = printed.getvalue()
    assert "rows x" not in text and "..." not in text  # pandas printed every row and column
    lines = text.splitlines()
    assert lines[0].split() == ["agent", "precision", "mean_reward", "E", "%", "fixed_flip_rate"]
    assert [line.split()[3] for line in lines[1:4]] == ["fp32", "int8", "int4"]  # 'my_agent.zip #hash' is 2 words
    assert all(re.fullmatch(r"-?\d+\.\d+", line.split()[4]) for line in lines[1:4])  # mean rewards, as numbers
    assert "verdict" in text and "certified minimum" in text
