"""The generated C is safe to ship on inputs a firmware engineer will meet: an observation wider than every hidden
layer, a policy with no hidden layer, and NaN, ±inf and huge values, each run under AddressSanitizer and
UndefinedBehaviorSanitizer (float-cast-overflow included); and its bias is exact, so it acts as the fake-quant
policy it claims to be. No zoo agent: the policies are built here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from quarl_bench.deploy.backends import program_artifact
from quarl_bench.deploy.c_build import HOST_FLAGS, host_runner
from quarl_bench.deploy.c_int8 import quantize_mlp
from quarl_bench.deploy.mlp import Dense, Mlp
from quarl_bench.errors import QuarlError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc with its sanitizer runtimes")

SANITIZE = ["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all", "-g"]
# what each test feeds: finite values well inside and far outside any calibrated range, then the non-finite ones
FINITE = [0.0, 0.3, -0.7, 1e30, -1e30, 3.4e38, -3.4e38, 1e-45]
NON_FINITE = [float("nan"), float("inf"), float("-inf")]

CHECK = r"""
#include <math.h>
#include <stdio.h>
#include "policy.h"
int main(void) {
    const float values[] = {VALUES};
    const int count = (int)(sizeof values / sizeof values[0]);
    float observation[QUARL_OBS_DIM], action[QUARL_ACTION_DIM > 0 ? QUARL_ACTION_DIM : 1];
    int v, i, j, status;
    for (v = 0; v < count; v++) {
        for (i = 0; i < QUARL_OBS_DIM; i++) {
            for (j = 0; j < QUARL_OBS_DIM; j++) observation[j] = 0.25f * (float)j;
            observation[i] = values[v];
            action[0] = -12345.0f;
            status = quarl_policy_act(observation, action);
            printf("%d %g\n", status, (double)action[0]);
        }
    }
    return 0;
}
"""


def mlp(widths: list[int], head: str = "argmax", activation: str = "relu", seed: int = 0) -> Mlp:
    """A random MLP ``widths[0] -> ... -> widths[-1]``: Discrete (argmax) or a Box action clipped to [-2, 2]."""
    rng = np.random.default_rng(seed)
    layers = tuple(
        Dense(
            rng.normal(0, 1 / np.sqrt(n_in), (n_out, n_in)).astype(np.float32),
            rng.normal(0, 0.3, n_out).astype(np.float32),
            activation if index < len(widths) - 2 else "none",
        )
        for index, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:], strict=True))
    )
    box = head == "clip"
    bounds = {"low": np.full(widths[-1], -2.0, np.float32), "high": np.full(widths[-1], 2.0, np.float32)} if box else {}
    return Mlp(layers, head, widths[0], widths[-1] if box else 1, **bounds)


def sanitized_run(policy: Mlp, folder: Path, values: list[float]) -> list[tuple[int, float]]:
    """The policy's C, built with the sanitizers, fed each value in each observation slot: (status, action[0])."""
    states = np.random.default_rng(1).normal(0, 1, (256, policy.obs_dim)).astype(np.float32)
    artifact = program_artifact(quantize_mlp(policy, states))
    for name, data in artifact.named_files().items():
        (folder / name).write_bytes(data)
    literals = ", ".join(
        "NAN" if v != v else ("INFINITY" if v > 0 else "-INFINITY") if abs(v) == float("inf") else f"{v!r}f"
        for v in values
    )
    (folder / "check.c").write_text(CHECK.replace("VALUES", literals))
    binary = folder / "check"
    build = [shutil.which("gcc"), *HOST_FLAGS, "-Wextra", "-Wpedantic", "-Wconversion", "-Wshadow", *SANITIZE]
    subprocess.run([*build, "policy.c", "check.c", "-o", str(binary), "-lm"], cwd=folder, check=True)
    result = subprocess.run([str(binary)], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "runtime error" not in result.stderr, result.stderr[-2000:]
    return [(int(status), float(action)) for status, action in (line.split() for line in result.stdout.splitlines())]


def test_an_observation_wider_than_every_hidden_layer_stays_in_its_buffer(tmp_path: Path) -> None:
    """D1: 4 inputs into 2 hidden units once overflowed the hidden-sized buffer (ASan: global-buffer-overflow)."""
    found = sanitized_run(mlp([4, 2, 2]), tmp_path, FINITE)
    assert len(found) == 4 * len(FINITE) and {status for status, _ in found} <= {0, 1}


def test_a_policy_with_no_hidden_layer_builds_warning_free_and_acts(tmp_path: Path) -> None:
    """D3: a linear policy (one Linear layer) builds under -Werror with every warning on, and acts."""
    found = sanitized_run(mlp([6, 3]), tmp_path, FINITE)
    assert {status for status, _ in found} <= {0, 1, 2} and len({status for status, _ in found}) > 1


@pytest.mark.parametrize("head", ["argmax", "clip"])
def test_a_non_finite_observation_returns_a_status_and_writes_no_action(tmp_path: Path, head: str) -> None:
    """D2: NaN and ±inf once reached ``(int32_t)v`` (undefined behaviour: -inf on x86, 0 on the M4). Now the
    call returns -1 and leaves the action as it was; huge finite values saturate and act."""
    policy = mlp([5, 8, 8, 2], head, activation="tanh" if head == "clip" else "relu")
    found = sanitized_run(policy, tmp_path, FINITE + NON_FINITE)
    finite, non_finite = found[: 5 * len(FINITE)], found[5 * len(FINITE) :]
    assert non_finite == [(-1, -12345.0)] * (5 * len(NON_FINITE))
    assert all(status >= 0 and action != -12345.0 for status, action in finite)
    if head == "clip":
        assert all(-2.0 <= action <= 2.0 for _, action in finite)


def test_the_c_bias_is_the_fake_quant_s_float_bias(tmp_path: Path) -> None:
    """The bias is added on the requantization product's grid, not rounded to the accumulator's: a layer whose
    bias sits between two accumulator steps acts as the float bias says. Here the host build and the same integer
    program with the bias rounded to the accumulator grid (CMSIS-NN's int32 bias) part on many states, and the C
    agrees with the exact program on every one."""
    policy = mlp([3, 16, 16, 2], "clip", activation="relu", seed=3)
    states = np.random.default_rng(1).normal(0, 1, (256, 3)).astype(np.float32)
    program = quantize_mlp(policy, states)
    artifact = program_artifact(program)
    run = host_runner(artifact.named_files(), 3, 2, False)
    probe = np.random.default_rng(7).normal(0, 1, (4000, 3)).astype(np.float32)
    c_actions = run(probe)
    exact = integer_reference(program, probe, exact_bias=True)
    rounded = integer_reference(program, probe, exact_bias=False)
    assert np.array_equal(c_actions, exact)
    assert (np.abs(rounded - exact).max(axis=1) > 0).mean() > 0.01  # the old rounding moved actions


def integer_reference(program, observations: np.ndarray, exact_bias: bool) -> np.ndarray:
    """The integer program in numpy (ReLU hidden layers, a clipped Box head), with the bias exact on the product
    grid (as the C) or rounded to the accumulator grid first (the old C)."""
    x = observations.astype(np.float32)
    first = program.layers[0]
    codes = np.clip(np.round(x / np.float32(first.input_step)) + first.input_zero + 128, 0, 255).astype(np.int64) - 128
    for layer in program.layers[:-1]:
        acc = (codes - layer.input_zero) @ layer.weight.astype(np.int64).T
        multiplier, shift = layer.multiplier.astype(np.int64), layer.shift.astype(np.int64)
        if exact_bias:
            product = acc * multiplier + layer.bias
        else:
            per_unit = layer.bias.astype(np.float64) / multiplier  # the same bias in accumulator units, rounded
            product = (acc + np.round(per_unit).astype(np.int64)) * multiplier
        right = 31 - shift
        value = (product + (np.int64(1) << (right - 1))) >> right
        codes = np.clip(value + layer.output_zero, layer.output_low, 127)
    last = program.layers[-1]
    acc = (codes - last.input_zero) @ last.weight.astype(np.int64).T
    value = acc.astype(np.float32) * last.output_scale + last.bias
    return np.clip(value, -2.0, 2.0).astype(np.float32)


def test_a_symbol_prefix_links_two_policies_into_one_image(tmp_path: Path) -> None:
    """``--c-prefix``: two policies, each with its own prefix, compile and link into one program (C and C++)."""
    states = np.random.default_rng(1).normal(0, 1, (64, 4)).astype(np.float32)
    for prefix in ("cart", "pole"):
        folder = tmp_path / prefix
        folder.mkdir()
        artifact = program_artifact(quantize_mlp(mlp([4, 8, 2]), states), prefix)
        for name, data in artifact.named_files().items():
            (folder / name).write_bytes(data)
    main = tmp_path / "main.c"
    main.write_text(
        '#include "cart/policy.h"\n#include "pole/policy.h"\n'
        "int main(void) { float o[CART_OBS_DIM] = {0}, a[1]; return cart_act(o, a) + pole_act(o, a) < 0; }\n"
    )
    gcc = shutil.which("gcc")
    sources = [str(main), str(tmp_path / "cart" / "policy.c"), str(tmp_path / "pole" / "policy.c")]
    subprocess.run([gcc, *HOST_FLAGS, *sources, "-o", str(tmp_path / "both")], check=True)
    assert subprocess.run([str(tmp_path / "both")], check=False).returncode == 0
    if shutil.which("g++"):
        cpp = tmp_path / "main.cpp"
        cpp.write_text(
            '#include "cart/policy.h"\nint main() { float o[CART_OBS_DIM] = {0}, a[1]; return cart_act(o, a) < 0; }\n'
        )
        subprocess.run(
            [
                shutil.which("gcc"),
                *HOST_FLAGS,
                "-c",
                str(tmp_path / "cart" / "policy.c"),
                "-o",
                str(tmp_path / "cart.o"),
            ],
            check=True,
        )
        subprocess.run(
            [shutil.which("g++"), str(cpp), str(tmp_path / "cart.o"), "-o", str(tmp_path / "cpp")], check=True
        )


def test_a_prefix_that_is_not_a_c_identifier_is_refused() -> None:
    states = np.zeros((8, 4), np.float32)
    with pytest.raises(QuarlError, match=r"bad --c-prefix '2fast': expected a C identifier"):
        program_artifact(quantize_mlp(mlp([4, 8, 2]), states), "2fast")


ACTOR_MODULE = '''
import torch
from torch import nn


class ReachActor(nn.Module):
    """CleanRL's actor shape: ReLU layers, tanh, then the action scale and bias buffers."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc_mu = nn.Linear(3, 32), nn.Linear(32, 32), nn.Linear(32, 1)
        self.register_buffer("action_scale", torch.tensor([[2.0]]))
        self.register_buffer("action_bias", torch.tensor([[0.0]]))

    def forward(self, x):
        x = torch.relu(self.fc2(torch.relu(self.fc1(x))))
        return torch.tanh(self.fc_mu(x)) * self.action_scale + self.action_bias


class SigmoidActor(ReachActor):
    def forward(self, x):
        return torch.sigmoid(self.fc_mu(torch.relu(self.fc2(torch.relu(self.fc1(x))))))


def reach():
    torch.manual_seed(0)
    return ReachActor()


def sigmoid():
    torch.manual_seed(0)
    return SigmoidActor()
'''


def test_an_actor_class_exports_like_a_sequential_and_another_op_is_named(cli, tmp_path: Path) -> None:
    """c-int8 traces a module (torch.fx) into its Linear / ReLU / Tanh / scale / offset chain: an actor class with
    a ``tanh * scale + bias`` head passes the gate exactly; a sigmoid head is refused in one line naming it."""
    import json

    (tmp_path / "actors.py").write_text(ACTOR_MODULE)
    common = ("--env", "Pendulum-v1", "--backend", "c-int8", "--store", tmp_path / "q.sqlite", "--max-episodes", "20")
    untrained = ("--tolerance-abs", "100", "--catastrophe", "500", "--allow-degraded")  # random weights: no δ scale
    out = tmp_path / "reach"
    code, _, err = cli(
        "export", "--policy-module", f"{tmp_path / 'actors.py'}:reach", *common, *untrained, "--out", out
    )
    assert code == 0, err
    parity = json.loads((out / "policy.json").read_text())["parity"]
    assert parity["passed"] and parity["max_error_steps"] < 1.0
    assert "value = value * 0x1.0000000000000p+1f;" in (out / "policy.c").read_text()  # the action scale, 2.0
    refused = tmp_path / "sigmoid"
    code, _, err = cli("export", "--policy-module", f"{tmp_path / 'actors.py'}:sigmoid", *common, "--out", refused)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "this module calls torch.sigmoid; expected Linear, ReLU, Tanh" in err and not refused.exists()


@pytest.mark.parametrize("widths", [[5, 9, 7, 2], [4, 16, 2]])
def test_c_int4_unpacks_two_codes_a_byte_as_the_integer_program_says(tmp_path: Path, widths: list[int]) -> None:
    """c-int4: per-channel codes in [-7, 7], two per byte (odd input counts padded), int8 activations; the host
    build acts exactly as the integer program computed in numpy from the unpacked codes."""
    policy = mlp(widths, "clip", seed=5)
    states = np.random.default_rng(1).normal(0, 1, (256, widths[0])).astype(np.float32)
    program = quantize_mlp(policy, states, weight_bits=4)
    codes = np.concatenate([layer.weight.reshape(-1) for layer in program.layers])
    assert codes.min() == -7 and codes.max() == 7
    assert program.weight_bytes == sum(o * ((i + 1) // 2) for i, o in zip(widths[:-1], widths[1:], strict=True))
    artifact = program_artifact(program)
    assert artifact.backend == "c-int4" and "two codes a byte" in artifact.named_files()["policy.c"].decode()
    run = host_runner(artifact.named_files(), widths[0], widths[-1], False)
    probe = np.random.default_rng(9).normal(0, 1, (2000, widths[0])).astype(np.float32)
    assert np.array_equal(run(probe), integer_reference(program, probe, exact_bias=True))


@pytest.mark.skipif(
    bool(__import__("quarl_bench.deploy.c_build", fromlist=["x"]).cross_tools_missing()),
    reason="needs gcc-arm-none-eabi, libnewlib-arm-none-eabi, qemu-system-arm",
)
def test_c_int4_s_dsp_path_on_a_cortex_m4_acts_bit_for_bit_as_the_plain_host_loop() -> None:
    """The M4 build takes the DSP path (nibbles spread into int16 halves, SMLAD), the host the plain loop: the same
    action bits on 500 observations, odd input counts and negative codes included, in fewer instructions."""
    from quarl_bench.deploy.c_build import cortex_m4_instructions, play_recorded

    policy = mlp([9, 32, 13, 3], "clip", seed=7)
    states = np.random.default_rng(2).normal(0, 1, (256, 9)).astype(np.float32)
    files = program_artifact(quantize_mlp(policy, states, weight_bits=4)).named_files()
    probe = np.random.default_rng(3).normal(0, 1.5, (500, 9)).astype(np.float32)
    host = play_recorded(files, probe, "host")
    assert host == play_recorded(files, probe, "qemu") and len(set(host)) > 100
    # instruction counts under QEMU -icount (deterministic): 1.11x fewer here, 1.28x on a 256-wide MLP
    plain = cortex_m4_instructions(files, probe[:20], ("-DQUARL_NO_DSP",))
    assert plain > 1.05 * cortex_m4_instructions(files, probe[:20])
