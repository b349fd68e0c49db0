"""NF4, the 4-bit NormalFloat of QLoRA (Dettmers et al. 2023): 16 codes at quantiles of a standard normal, scaled by
each block of 64 values' largest magnitude (one fp32 scale per block: 0.5 bits per weight)."""

from __future__ import annotations

from typing import Any

from quarl_bench.precision import Precision, register

BLOCK = 64
# the 16 NF4 levels of bitsandbytes (functional.py, create_normal_map), normalised to [-1, 1]
LEVELS = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
)  # fmt: skip


def nf4_round_trip(tensor: Any, name: str = "nf4") -> Any:
    """``tensor`` stored as NF4 (blocks of 64 along its flattened values, absmax-scaled) and read back."""
    import torch

    flat = tensor.detach().reshape(-1).float()
    pad = (-len(flat)) % BLOCK
    blocks = torch.nn.functional.pad(flat, (0, pad)).reshape(-1, BLOCK)
    scale = blocks.abs().amax(dim=1, keepdim=True)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    levels = torch.tensor(LEVELS, dtype=torch.float32)
    codes = torch.argmin((blocks / scale).unsqueeze(-1).sub(levels).abs(), dim=-1)
    restored = (levels[codes] * scale).reshape(-1)[: len(flat)]
    return restored.reshape(tensor.shape).to(tensor.dtype)


register(Precision("nf4", "format", 4, 32 / BLOCK, f"{__name__}:nf4_round_trip"))
