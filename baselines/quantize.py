"""Row-wise stochastic quantisation of exchanged rows (AdaQP, METHODS.md section 8.4).

Each row x of F values is mapped to b-bit integers with its own offset lo = min(x) and scale
s = (max(x) - lo) / (2^b - 1): q = floor((x - lo) / s + u), u ~ U[0, 1) drawn per value, so that
E[lo + q s] = x (unbiased stochastic rounding). The integers are packed 8 / b to a byte (b = 2:
four values per byte, the first value in the lowest bits) and travel, with lo and s as two float32
per row, as ONE uint8 tensor ``[rows, ceil(F b / 8) + 8]``: what crosses the wire is exactly the
packed size plus 8 bytes of parameters per row.

``variance_proxy`` bounds what this rounding costs: one value's rounding variance is at most
s^2 / 4, so a row of range r at b bits has at most F r^2 / (4 (2^b - 1)^2); AdaQP's adaptive
assignment weighs blocks of rows by that bound's numerator.

Random draws come from a generator seeded by the caller (AdaQP: by (run seed, step, layer,
direction, rank)), on the rows' device, so a run and its resumption draw the same roundings.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

BITS = (2, 4, 8)
PARAM_BYTES = 8  # lo and scale, two float32 per row


def packed_width(features: int, bits: int) -> int:
    """Bytes of one packed row of ``features`` b-bit values: ceil(F b / 8)."""
    return math.ceil(features * bits / 8)


def wire_width(features: int, bits: int) -> int:
    """Bytes of one row on the wire: packed values plus its offset and scale."""
    return packed_width(features, bits) + PARAM_BYTES


def generator(seed: int, device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed % (2 ** 63))


def mix(*parts: int) -> int:
    """One 63-bit seed from several integers (the same on every worker and after a resume)."""
    out = 0
    for p in parts:
        out = (out * 1_000_003 + int(p) + 1) % (2 ** 63)
    return out


def quantize(x: Tensor, bits: int, gen: torch.Generator | None = None,
             stochastic: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """``x [R, F]`` -> (q uint8 ``[R, F]`` in 0..2^b-1, lo float32 ``[R]``, scale float32 ``[R]``).
    ``stochastic=False`` rounds to nearest (biased; for tests and comparisons only)."""
    if bits not in BITS:
        raise ValueError(f"quantisation to {bits} bits: choose from {BITS}")
    x = x.detach().float()
    levels = 2 ** bits - 1
    if x.size(0) == 0:
        empty = x.new_empty(0)
        return torch.empty(x.shape, dtype=torch.uint8, device=x.device), empty, empty
    lo, hi = torch.aminmax(x, dim=1)
    scale = (hi - lo) / levels
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))  # constant row: q = 0, x = lo
    v = (x - lo[:, None]) / safe[:, None]  # in [0, levels] up to round-off
    if stochastic:
        v = v + torch.rand(x.shape, generator=gen, device=x.device, dtype=x.dtype)
    else:
        v = v + 0.5
    q = v.floor_().clamp_(0, levels).to(torch.uint8)
    return q, lo, scale


def variance_proxy(x: Tensor, counts: list[int]) -> Tensor:
    """V per block of consecutive rows: the sum over its rows of F r^2 / 4 (r = max - min of the
    row), so that quantising the block to b bits adds at most V / (2^b - 1)^2 of variance.

    Shapes: ``x [sum(counts), F]``, ``counts`` rows per block -> float32 ``[len(counts)]``."""
    out = torch.zeros(len(counts), dtype=torch.float32, device=x.device)
    if x.size(0) == 0:
        return out
    lo, hi = torch.aminmax(x.detach().float(), dim=1)
    per_row = (hi - lo).square() * (x.size(1) / 4)
    block = torch.repeat_interleave(torch.arange(len(counts), device=x.device),
                                    torch.tensor(counts, device=x.device))
    return out.index_add_(0, block, per_row)


def dequantize(q: Tensor, lo: Tensor, scale: Tensor, dtype=torch.float32) -> Tensor:
    """``lo + q * scale``, rows ``[R, F]``."""
    return (lo[:, None] + q.float() * scale[:, None]).to(dtype)


def pack(q: Tensor, bits: int) -> Tensor:
    """uint8 values < 2^b, ``[R, F]`` -> ``[R, ceil(F b / 8)]`` bytes (value j of a byte in bits
    j b .. j b + b - 1)."""
    per = 8 // bits
    if per == 1:
        return q.contiguous()
    R, F = q.shape
    pad = (-F) % per
    if pad:
        q = torch.cat([q, q.new_zeros(R, pad)], 1)
    q = q.view(R, (F + pad) // per, per)
    out = q[..., 0].clone()
    for j in range(1, per):
        out |= q[..., j] << (j * bits)
    return out


def unpack(packed: Tensor, bits: int, features: int) -> Tensor:
    """The inverse of ``pack``: ``[R, ceil(F b / 8)]`` -> uint8 ``[R, F]``."""
    per = 8 // bits
    if per == 1:
        return packed[:, :features]
    mask = 2 ** bits - 1
    parts = [(packed >> (j * bits)) & mask for j in range(per)]
    return torch.stack(parts, -1).view(packed.size(0), packed.size(1) * per)[:, :features]


def encode(x: Tensor, bits: int, gen: torch.Generator | None = None) -> Tensor:
    """Rows ``[R, F]`` -> the wire tensor uint8 ``[R, ceil(F b / 8) + 8]``."""
    q, lo, scale = quantize(x, bits, gen)
    params = torch.stack([lo, scale], 1).contiguous().view(torch.uint8)  # [R, 8]
    return torch.cat([pack(q, bits), params], 1)


def decode(wire: Tensor, bits: int, features: int, dtype=torch.float32) -> Tensor:
    """The wire tensor ``[R, ceil(F b / 8) + 8]`` -> dequantised rows ``[R, F]``."""
    nb = packed_width(features, bits)
    params = wire.new_empty(wire.size(0), PARAM_BYTES).copy_(wire[:, nb:]).view(torch.float32)
    return dequantize(unpack(wire[:, :nb], bits, features), params[:, 0], params[:, 1], dtype)
