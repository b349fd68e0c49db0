"""The precision registry: names in, values out; unknown names refused; a format added by one registration is taken
by specs and PTQ like the built-in ones."""

from __future__ import annotations

import pytest
import torch
from stable_baselines3 import PPO

from quarl_bench import precision as registry
from quarl_bench.errors import QuarlError
from quarl_bench.precision import Precision, precision
from quarl_bench.quant.quantize import quantize
from quarl_bench.types import QuantSpec


def test_names_become_values() -> None:
    assert (precision("8").name, precision(8).bits, precision("int8").is_int) == ("int8", 8, True)
    assert precision(32).name == "fp32" and precision("fp32").is_float
    assert precision("bf16").bits == 16 and not precision("bf16").is_int
    assert precision("mxfp4").is_format and precision("mxfp4").bits_per_weight == 4.25  # + an 8-bit scale per 32
    assert precision("nvfp4").bits_per_weight == 4.5  # + an 8-bit scale per 16


@pytest.mark.parametrize("name", ["int4-nf4", "int1", "int33", "fp7", "nf4"])
def test_unknown_names_are_refused_with_the_accepted_ones(name: str) -> None:
    with pytest.raises(QuarlError, match=rf"bad precision '{name}': expected an integer 2-32, or one of fp32, .*nvfp4"):
        precision(name)


def test_round_trips_on_hand_made_values() -> None:
    third = torch.tensor([1 / 3])
    assert precision("fp16").round_trip(third).item() == 0.333251953125  # the nearest half-precision value
    assert precision("fp32").round_trip(third) is third
    e2m1 = torch.tensor([[0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0] * 4])  # every e2m1 value, block max 6: scale 1
    assert torch.equal(precision("mxfp4").round_trip(e2m1), e2m1)
    assert torch.equal(precision("mxfp4").round_trip(e2m1 * 1.01), e2m1)  # rounded back to the grid


def sign_round_trip(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """A toy 2-bit format: the sign of each value (-1, 0, 1)."""
    return torch.sign(tensor)


@pytest.fixture
def toy_format():
    entry = registry.register(Precision("sign2", "format", 2, 0.0, f"{__name__}:sign_round_trip"))
    yield entry
    del registry.PRECISIONS.entries["sign2"]


def test_a_registered_format_is_a_precision_like_any_other(toy_format: Precision) -> None:
    spec = QuantSpec("SIGN2")
    assert spec.precision == "sign2" and spec.bits == 2 and spec.number_format is toy_format
    policy = PPO("MlpPolicy", "CartPole-v1", device="cpu", seed=0).policy
    quantized, _ = quantize(policy, spec)
    weights = quantized.action_net.weight.detach().unique().tolist()
    assert set(weights) <= {-1.0, 0.0, 1.0}
