"""What the parameter quantizer broadcasts: weights quantized to ``comm_bits`` and bit-packed (ActorQ's q_c)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from quarl_bench.quant.affine import to_grid


@dataclass(frozen=True)
class PackedTensor:
    shape: tuple[int, ...]
    bits: int
    payload: bytes  # raw fp32/fp16 bytes, or bit-packed unsigned codes
    low: float = 0.0
    step: float = 0.0

    @property
    def nbytes(self) -> int:
        return len(self.payload) + 16  # + shape/scale header, roughly


def pack(tensor: torch.Tensor, bits: int) -> PackedTensor:
    """32: fp32 bytes; 16: fp16 bytes; 2-8: affine codes over [min, max] with 2^bits levels, packed bits-wide."""
    array = tensor.detach().cpu().float().numpy()
    if bits == 32:
        return PackedTensor(array.shape, 32, array.tobytes())
    if bits == 16:
        return PackedTensor(array.shape, 16, array.astype(np.float16).tobytes())
    if not 2 <= bits <= 8:
        raise ValueError(f"bad comm bits {bits}: expected 32, 16 or 2-8")
    grid = to_grid(torch.from_numpy(array), bits, "min-max")
    low, step = float(grid.offset), float(grid.step)
    codes = grid.codes.numpy().astype(np.uint8).ravel()
    bit_planes = np.unpackbits(codes[:, None], axis=1)[:, 8 - bits :]  # keep the low `bits` bits of each code
    return PackedTensor(array.shape, bits, np.packbits(bit_planes.ravel()).tobytes(), low, step)


def unpack(packed: PackedTensor) -> torch.Tensor:
    if packed.bits == 32:
        return torch.from_numpy(np.frombuffer(packed.payload, dtype=np.float32).reshape(packed.shape).copy())
    if packed.bits == 16:
        return torch.from_numpy(
            np.frombuffer(packed.payload, dtype=np.float16).astype(np.float32).reshape(packed.shape)
        )
    count = int(np.prod(packed.shape))
    bits = np.unpackbits(np.frombuffer(packed.payload, dtype=np.uint8))[: count * packed.bits].reshape(
        count, packed.bits
    )
    padded = np.concatenate([np.zeros((count, 8 - packed.bits), dtype=np.uint8), bits], axis=1)
    codes = np.packbits(padded, axis=1).ravel().astype(np.float32)
    return torch.from_numpy((codes * packed.step + packed.low).reshape(packed.shape))


def pack_state(state: dict[str, torch.Tensor], bits: int) -> dict[str, PackedTensor]:
    return {name: pack(tensor, bits) for name, tensor in state.items()}


def unpack_state(packed: dict[str, PackedTensor]) -> dict[str, torch.Tensor]:
    return {name: unpack(tensor) for name, tensor in packed.items()}


def state_nbytes(packed: dict[str, PackedTensor]) -> int:
    return sum(tensor.nbytes for tensor in packed.values())
