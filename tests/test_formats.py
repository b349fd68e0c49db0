"""Number formats against hand-written codebooks: every e2m1 and e4m3 value, ties at the edges, saturation, the
MX shared power-of-two scale and NVFP4's two-level scale."""

from __future__ import annotations

import itertools

import pytest
import torch

from quarl_bench.quant.formats import (
    E2M1,
    E4M3,
    E5M2,
    fp8_round_trip,
    mx_round_trip,
    nvfp4_round_trip,
    round_minifloat,
)

E2M1_POSITIVE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e4m3_positive() -> list[float]:
    """Every finite non-negative e4m3fn value, written out: subnormals m/8 * 2^-6, normals (1 + m/8) * 2^e for
    e = -6..8, without the all-ones pattern (NaN), so 448 is the largest."""
    subnormals = [m / 8 * 2**-6 for m in range(8)]
    normals = [(1 + m / 8) * 2**e for e, m in itertools.product(range(-6, 9), range(8)) if not (e == 8 and m == 7)]
    return sorted(subnormals + normals)


def test_e2m1_codebook_is_fixed_and_ties_round_to_even() -> None:
    values = torch.tensor(E2M1_POSITIVE + [-v for v in E2M1_POSITIVE])
    assert torch.equal(round_minifloat(values, E2M1), values)
    # midpoints: the neighbour with the even mantissa wins
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert round_minifloat(ties, E2M1).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert round_minifloat(torch.tensor([-5.0, 6.9, 100.0]), E2M1).tolist() == [-4.0, 6.0, 6.0]  # saturation


def test_e4m3_codebook_matches_torch_float8() -> None:
    codebook = torch.tensor(e4m3_positive())
    assert len(codebook) == 127 and codebook.max() == 448 and codebook[1] == 2**-9
    every_byte = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    finite = every_byte[~torch.isnan(every_byte)]
    assert torch.equal(torch.unique(finite.abs()), codebook)
    assert torch.equal(round_minifloat(codebook, E4M3), codebook)
    # between every pair of neighbours: the midpoint (a tie), and points just either side of it
    low, high = codebook[:-1], codebook[1:]
    probes = torch.cat([(low + high) / 2, low + (high - low) * 0.49, low + (high - low) * 0.51])
    probes = torch.cat([probes, -probes])
    assert torch.equal(round_minifloat(probes, E4M3), probes.to(torch.float8_e4m3fn).float())


def test_e5m2_rounding_matches_torch_float8() -> None:
    values = torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 1000
    assert torch.equal(round_minifloat(values, E5M2), values.to(torch.float8_e5m2).float())


def test_fp8_scales_per_tensor_and_saturates_at_the_calibrated_range() -> None:
    # scale 4 / 448: the weights become -224, 11.2, 112 and 448 in e4m3 units; 11.2 lies in [8, 16), whose step is
    # 1, so it is stored as 11, read back as 11 * 4 / 448; the others are e4m3 values and come back exactly
    weight = torch.tensor([-2.0, 0.1, 1.0, 4.0])
    out = fp8_round_trip(weight, "fp8-e4m3")
    assert out.tolist() == pytest.approx([-2.0, 11 * 4 / 448, 1.0, 4.0], rel=1e-6)
    assert out[-1] == 4.0  # the maximum maps exactly onto 448
    # a calibrated range of 1: values beyond it saturate (a plain cast would give NaN)
    clipped = fp8_round_trip(torch.tensor([5.0, -9.0]), "fp8-e4m3", torch.tensor(1.0))
    assert clipped.tolist() == [1.0, -1.0]


def test_mx_blocks_share_a_power_of_two_scale() -> None:
    # block 1: max 10 -> shared exponent floor(log2 10) - emax(e2m1)=2 -> 1, scale 2: 10/2 = 5 rounds to 4 -> 8
    # block 2: max 6 -> scale 1: values on the e2m1 grid stay
    first = torch.tensor([10.0, 1.0, 0.6] + [0.0] * 29)
    second = torch.tensor([6.0, -3.0, 0.5, 1.5] + [0.0] * 28)
    out = mx_round_trip(torch.cat([first, second]).reshape(1, 64), "mxfp4").reshape(-1)
    assert out[:3].tolist() == [8.0, 1.0, 1.0]  # 1/2 = 0.5 exact; 0.6/2 = 0.3 rounds to 0.5 -> 1
    assert torch.equal(out[32:36], torch.tensor([6.0, -3.0, 0.5, 1.5]))


def test_mx_exponent_is_exact_just_below_a_power_of_two() -> None:
    # amax 2**24 - 1: floor(log2) is 23, but float32 log2 rounds it to 24. Exponent 23 - emax 2 -> scale 2**21, and
    # amax / scale = 7.9999995 saturates at e2m1's 6 (OCP); the rounded-up exponent would give 4 * 2**22 instead.
    block = torch.tensor([[2.0**24 - 1] + [0.0] * 31])
    assert mx_round_trip(block, "mxfp4")[0, 0] == 6 * 2.0**21


def test_mx_saturates_the_block_maximum_as_ocp_specifies() -> None:
    # amax 480 -> shared exponent floor(log2 480) - 8 = 0: 480 lies above e4m3's 448 and clamps there (OCP v1.0), so
    # on such blocks mxfp8 can lose more than mxfp6 (whose clamp is 7.5 of [4, 8))
    assert mx_round_trip(torch.tensor([[480.0] + [1.0] * 31]), "mxfp8")[0, 0] == 448.0
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    errors = {f: float(torch.mean((mx_round_trip(x, f) - x) ** 2)) for f in ("mxfp8", "mxfp6", "mxfp4")}
    assert max(errors["mxfp8"], errors["mxfp6"]) < errors["mxfp4"] / 4


def test_nvfp4_scales_each_16_values_in_fp8() -> None:
    x = torch.zeros(1, 32)
    x[0, :16] = torch.linspace(-3, 3, 16)
    x[0, 16] = 600.0  # sets the tensor scale: 600 / (448 * 6)
    out = nvfp4_round_trip(x)
    # tensor scale g = 600 / (448 * 6); block 1's amax 3 asks for a block scale of 3 / 6 / g = 2.24, which e4m3
    # stores as 2.25 (its step in [2, 4) is 0.25). The values -3, -2.6, ..., 3 over 2.25 g = 0.5022 are -5.97,
    # -5.18, -4.38, -3.58, -2.79, -1.99, -1.19, -0.40 (and mirrored), whose nearest e2m1 codes are:
    codes = torch.tensor([-6, -6, -4, -4, -3, -2, -1, -0.5, 0.5, 1, 2, 3, 4, 4, 6, 6])
    assert torch.allclose(out[0, :16], codes * 2.25 * 600.0 / (448 * 6))
    assert out[0, 16] == pytest.approx(600.0, rel=1e-6)  # the block maximum lands on 6 x its scale
    assert torch.equal(nvfp4_round_trip(torch.zeros(3, 16)), torch.zeros(3, 16))


def test_unknown_format_is_refused() -> None:
    from quarl_bench.errors import QuarlError
    from quarl_bench.precision import precision

    with pytest.raises(QuarlError, match="bad precision 'fp9'"):
        precision("fp9").round_trip(torch.ones(2))


@pytest.mark.parametrize(
    ("name", "numel", "scale_bits"),
    [
        ("mxfp4", 32, 8),  # one E8M0 exponent per 32 values
        ("mxfp4", 33, 16),  # a partial block pays a whole exponent
        ("nvfp4", 16, 8 + 32),  # an e4m3 per 16, one fp32 per tensor
        ("nvfp4", 17, 16 + 32),
        ("fp8-e4m3", 1000, 32),  # one fp32 per tensor
        ("int4", 1000, 0),
    ],
)
def test_a_format_s_scales_cost_what_its_layout_stores(name: str, numel: int, scale_bits: int) -> None:
    from quarl_bench.precision import precision

    assert precision(name).scale_bits_of(numel) == scale_bits


def test_every_format_the_cli_accepts_has_a_quantizer() -> None:
    from quarl_bench.precision import names, parse_precision, precision

    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(2))
    for name in names("format"):
        assert parse_precision(name.upper()) == name
        out = precision(name).round_trip(x)
        assert out.shape == x.shape and 0 < float(torch.mean((out - x) ** 2)) < 0.05
