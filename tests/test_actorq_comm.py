"""ActorQ broadcast packing: bytes really shrink, and the round-trip error is bounded by half a step."""

from __future__ import annotations

import pytest
import torch

from quarl_bench.actorq.comm import pack, pack_state, state_nbytes, unpack


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 8])
def test_round_trip_error_is_at_most_half_a_step(bits: int) -> None:
    torch.manual_seed(bits)
    w = torch.randn(37, 11)
    packed = pack(w, bits)
    step = (w.max() - w.min()) / (2**bits - 1)
    assert (unpack(packed) - w).abs().max() <= step / 2 + 1e-6
    assert len(packed.payload) == -(-w.numel() * bits // 8)  # ceil(numel * bits / 8) bytes


def test_fp32_and_fp16_round_trips() -> None:
    w = torch.randn(8, 8)
    assert torch.equal(unpack(pack(w, 32)), w)
    assert torch.equal(unpack(pack(w, 16)), w.half().float())


def test_broadcast_bytes_shrink_with_comm_bits() -> None:
    state = {"a": torch.randn(256, 256), "b": torch.randn(256)}
    sizes = {bits: state_nbytes(pack_state(state, bits)) for bits in (32, 16, 8, 4)}
    assert sizes[32] / sizes[16] > 1.99 and sizes[32] / sizes[8] > 3.98 and sizes[32] / sizes[4] > 7.9
