"""What a new registration gets by default follows its value: a backend without a claim is gated against its own
precision (never int8 W8A8), and a new per-tensor-scaled format takes calibrated activation ranges."""

from __future__ import annotations

import pytest
import torch

from quarl_bench import precision as registry
from quarl_bench.deploy.parity import claimed_spec
from quarl_bench.deploy.targets import BACKENDS, Backend
from quarl_bench.quant.activations import Range, quantize_activation

SEEN: list[object] = []


def recording_round_trip(x: torch.Tensor, name: str, amax: torch.Tensor | None = None) -> torch.Tensor:
    SEEN.append(amax)
    return x


@pytest.mark.parametrize(("precision", "claimed"), [("fp16", "fp16"), ("bf16", "bf16"), ("int4", "int4")])
def test_a_backend_without_a_claim_is_gated_against_its_own_precision(monkeypatch, precision: str, claimed: str):
    monkeypatch.setitem(BACKENDS.entries, "scratch", Backend("scratch", precision, "onnx", "deploy", (), "x:y"))
    spec = claimed_spec("scratch")
    assert spec.precision == claimed and not spec.act_bits  # not W8A8


def test_int8_backends_still_claim_w8a8() -> None:
    assert claimed_spec("ort-int8-static").act_bits == "int8" and claimed_spec("ort-int8-static").obs_bits == "fp32"
    assert claimed_spec("c-int4").precision == "int4"  # its registered claim


@pytest.mark.parametrize("tensor_scaled", [True, False])
def test_a_new_format_takes_calibrated_ranges_when_it_is_scaled_per_tensor(monkeypatch, tensor_scaled: bool) -> None:
    entry = registry.Precision("fp8-new", "format", 8, 0.0, f"{__name__}:recording_round_trip", "", tensor_scaled)
    monkeypatch.setitem(registry.PRECISIONS.entries, "fp8-new", entry)
    SEEN.clear()
    quantize_activation(torch.ones(3), "fp8-new", Range(torch.tensor(-2.0), torch.tensor(5.0)))
    assert ([torch.tensor(5.0)] if tensor_scaled else [None]) == SEEN


def test_fp8_takes_its_calibrated_range() -> None:
    x = torch.tensor([0.1, 1.0, 3.0])
    narrow = quantize_activation(x, "fp8-e4m3", Range(torch.tensor(0.0), torch.tensor(1.0)))
    wide = quantize_activation(x, "fp8-e4m3", Range(torch.tensor(0.0), torch.tensor(3.0)))
    assert float(narrow[2]) <= 1.0 + 1e-6 and float(wide[2]) == pytest.approx(3.0, rel=0.07)


def test_harden_for_a_backend_aims_at_its_claim() -> None:
    from quarl_bench.api.harden import backend_target

    assert backend_target("c-int4", {}) == claimed_spec("c-int4")
    assert backend_target("c-int4", {"precision": "int4", "granularity": "per-channel"}).act_bits == "int8"
    assert backend_target("ort-int8-static", {}).obs_bits == "fp32"


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (("--for", "c-int4", "--bits", "8"), ("--bits int8 contradicts --for c-int4", "int4")),
        (("--for", "c-int4", "--granularity", "per-tensor"), ("--granularity per-tensor", "per-channel")),
        (("--for", "c-int4", "--act-bits", "4"), ("--act-bits int4", "int8")),
        (("--for", "ort-fp32"), ("bad --for ort-fp32", "c-int4")),
        (("--for", "tensorrt"), ("'tensorrt'", "c-int4")),
    ],
)
def test_harden_for_refuses_what_contradicts_its_claim_in_one_line(cli, tmp_path, flags, fragments) -> None:
    code, _, err = cli("harden", "--algo", "dqn", "--env", "CartPole-v1", *flags, "--store", tmp_path / "q.sqlite")
    assert code == 2 and len(err.strip().splitlines()) == 1 and all(f in err for f in fragments), err
    assert not (tmp_path / "q.sqlite").exists()
