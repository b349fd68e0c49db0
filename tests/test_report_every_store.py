"""``report --html`` renders every store one command can write: the smallest store of each command (PTQ with only
fp16, only formats, only integers; deploy; certify with each guarantee; export; fidelity; harden; mixed;
sensitivity; rollout; actorq; qat; amp; table4), and the page shows what that store holds."""

from __future__ import annotations

from pathlib import Path

import pytest

AGENT = ("--algo", "dqn", "--env", "CartPole-v1")
CERTIFY = ("certify", *AGENT, "--bits", "8", "--batch", "5", "--max-episodes", "5", "--tolerance-abs", "50")

# name -> (the command, words the page must show)
STORES = {
    "ptq fp16 only": (("run", *AGENT, "--bits", "fp16", "-n", "2"), ("fp16",)),
    "ptq formats only": (("run", *AGENT, "--bits", "fp8-e4m3", "nvfp4", "-n", "2"), ("fp8-e4m3", "nvfp4")),
    "ptq integers only": (("run", *AGENT, "--bits", "8", "4", "-n", "2"), ("int8", "int4")),
    "deploy": (("deploy", *AGENT, "--backend", "ort-fp32", "-n", "2"), ("ort-fp32",)),
    "certify finite-sample": (CERTIFY, ("Certified verdicts", "finite-sample")),
    "certify asymptotic": ((*CERTIFY, "--guarantee", "asymptotic"), ("Certified verdicts", "asymptotic")),
    "export": (
        ("export", *AGENT, "--backend", "ort-fp32", "--max-episodes", "20", "--out", "{tmp}/art"),
        ("ort-fp32",),
    ),
    "table4": (("table4", "--policy", "I", "--backend", "ort-int8-static", "--calls", "20"), ("Policy I", "cores")),
    "fidelity": (("fidelity", *AGENT, "--bits", "8", "-n", "2"), ("int8",)),
    "sensitivity": (("sensitivity", *AGENT, "--bits", "8", "4", "-n", "2"), ("int4",)),
    "mixed": (
        ("mixed", *AGENT, "-n", "2", "--bits", "8", "4", "--max-episodes", "20", "--search-seeds", "0"),
        ("int8",),
    ),
    "harden": (
        ("harden", *AGENT, "--bits", "4", "--budget", "500", "--max-episodes", "20", "--out", "{tmp}/hard.zip"),
        ("int4",),
    ),
    "rollout": (
        (
            "rollout",
            "--env",
            "CartPole",
            "--rollout-precision",
            "int8",
            "-n",
            "2048",
            "--episodes",
            "2",
            "--seeds",
            "0",
        ),
        ("int8",),
    ),
    "qat": (("qat", *AGENT, "--bits", "8", "-n", "2000", "--episodes", "2"), ("int8",)),
    "amp": (("amp", *AGENT, "--policy-arch", "small", "-n", "2000", "--episodes", "2"), ("bf16",)),
    "actorq": (
        ("actorq", "--algo", "dqn", "--env", "CartPole", "--n-actors", "1", "--actor-precision", "int8")
        + ("--max-actor-steps", "600", "--learning-starts", "100", "--max-seconds", "120", "--eval-episodes", "2"),
        ("int8",),
    ),
}
TAKES_FOLDER = {"run", "deploy", "certify", "export", "fidelity", "sensitivity", "mixed", "harden"}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.ray) if name == "actorq" else name for name in sorted(STORES)]
)
def test_report_renders_the_smallest_store_of_each_command(cli, zoo: Path, tmp_path: Path, name: str) -> None:
    command, shown = STORES[name]
    store = tmp_path / "store.sqlite"
    args = [str(a).replace("{tmp}", str(tmp_path)) for a in command]
    if args[0] in TAKES_FOLDER:
        args += ["--folder", str(zoo)]
    code, _, err = cli(*args, "--store", store)
    assert code in (0, 1), err  # 1: a run that completes with a verdict or gate it reports as failed
    assert store.is_file(), f"{name}: nothing stored"
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report", "--html")
    assert code == 0, err
    page = (tmp_path / "report" / "report.html").read_text()
    assert all(word in page for word in shown), (name, [w for w in shown if w not in page])
    assert "anytime-valid confidence sequence" not in page  # the note names each verdict's guarantee instead
