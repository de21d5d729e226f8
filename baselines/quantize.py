"""Row-wise stochastic quantisation of exchanged rows (AdaQP, docs/methods.md section 8.4).

Each row x of F values is mapped to b-bit integers with its own offset lo = min(x) and scale
s = (max(x) - lo) / (2^b - 1): q = floor((x - lo) / s + u), u ~ U[0, 1) drawn per value, so that
E[lo + q s] = x (unbiased stochastic rounding). The integers are packed 8 / b to a byte (b = 2:
four values per byte, the first value in the lowest bits) and travel, with lo and s as two float32
per row, as ONE uint8 tensor ``[rows, ceil(F b / 8) + 8]``: what crosses the wire is exactly the
packed size plus 8 bytes of parameters per row.

``variance_proxy`` bounds what this rounding costs: one value's rounding variance is at most
s^2 / 4, so a row of range r at b bits has at most F r^2 / (4 (2^b - 1)^2); AdaQP's adaptive
assignment weighs blocks of rows by that bound's numerator.

Random draws come from a generator seeded by the caller (AdaQP: ``digest.seeds.mix`` of (run
seed, step, layer, direction, rank)), on the rows' device, so a run and its resumption draw the
same roundings.

Sylvie (docs/methods.md section 10.2, baselines/sylvie.py) uses the same code at b = 1 (eight values
per byte: each value becomes its row's min or max, P(max) = (x - min) / (max - min)) and may send
the two row parameters as bfloat16 (``params=torch.bfloat16``, 4 bytes per row instead of 8). A
narrower parameter is rounded OUTWARD before quantising (lo down, scale up, so lo' <= min and
lo' + (2^b - 1) s' >= max) and the values are quantised against the rounded lo' and s', i.e.
against exactly what the receiver reads: the reconstruction stays unbiased (rounding lo and s
after quantising, as the reference code's half-precision parameters do, would bias it by up to
the parameters' rounding error). The price: the two levels of a 1-bit row are lo' and
lo' + s', up to 2^-8 of the row's range outside its min and max.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

BITS = (2, 4, 8)  # AdaQP's widths (its --quant-bits and the adaptive assignment's steps)
ALL_BITS = (1, 2, 4, 8)  # what quantize / pack accept (Sylvie's default is 1)
PARAM_BYTES = 8  # lo and scale, two float32 per row
PARAM_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def param_bytes(params=torch.float32) -> int:
    """Bytes of one row's two parameters (lo and scale) in dtype ``params``."""
    return 2 * torch.empty(0, dtype=params).element_size()


def packed_width(features: int, bits: int) -> int:
    """Bytes of one packed row of ``features`` b-bit values: ceil(F b / 8)."""
    return math.ceil(features * bits / 8)


def wire_width(features: int, bits: int, params=torch.float32) -> int:
    """Bytes of one row on the wire: packed values plus its offset and scale."""
    return packed_width(features, bits) + param_bytes(params)


def generator(seed: int, device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed % (2 ** 63))


def outward(t: Tensor, dtype, down: bool) -> Tensor:
    """float32 ``t`` rounded to the nearest value of ``dtype`` below (``down``) or above it,
    returned as float32 (exactly representable in ``dtype``)."""
    if dtype == torch.float32:
        return t
    r = t.to(dtype)
    wrong = r.float() > t if down else r.float() < t
    if bool(wrong.any()):
        toward = torch.full_like(r, float("-inf") if down else float("inf"))
        r = torch.where(wrong, torch.nextafter(r, toward), r)
    return r.float()


def quantize(x: Tensor, bits: int, gen: torch.Generator | None = None,
             stochastic: bool = True, params=torch.float32) -> tuple[Tensor, Tensor, Tensor]:
    """``x [R, F]`` -> (q uint8 ``[R, F]`` in 0..2^b-1, lo float32 ``[R]``, scale float32 ``[R]``).
    ``stochastic=False`` rounds to nearest (biased; for tests and comparisons only). ``params``:
    the dtype lo and scale travel in; narrower than float32 they are rounded outward first and
    the values quantised against the rounded ones (module docstring), so lo and scale are
    exactly representable in ``params``."""
    if bits not in ALL_BITS:
        raise ValueError(f"quantisation to {bits} bits: choose from {ALL_BITS}")
    x = x.detach().float()
    levels = 2 ** bits - 1
    if x.size(0) == 0:
        empty = x.new_empty(0)
        return torch.empty(x.shape, dtype=torch.uint8, device=x.device), empty, empty
    lo, hi = torch.aminmax(x, dim=1)
    lo = outward(lo, params, down=True)
    scale = outward((hi - lo) / levels, params, down=False)
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


def to_wire(q: Tensor, lo: Tensor, scale: Tensor, bits: int, params=torch.float32) -> Tensor:
    """``quantize``'s output -> the wire tensor uint8 ``[R, ceil(F b / 8) + param_bytes]``."""
    p = torch.stack([lo, scale], 1).to(params).contiguous().view(torch.uint8)  # [R, 2 size]
    return torch.cat([pack(q, bits), p], 1)


def encode(x: Tensor, bits: int, gen: torch.Generator | None = None,
           params=torch.float32) -> Tensor:
    """Rows ``[R, F]`` -> the wire tensor uint8 ``[R, ceil(F b / 8) + 8]`` (``params`` float32;
    bfloat16: ``+ 4``)."""
    return to_wire(*quantize(x, bits, gen, params=params), bits, params)


def decode(wire: Tensor, bits: int, features: int, dtype=torch.float32,
           params=torch.float32) -> Tensor:
    """The wire tensor ``[R, ceil(F b / 8) + param_bytes]`` -> dequantised rows ``[R, F]``."""
    nb, pb = packed_width(features, bits), param_bytes(params)
    p = wire.new_empty(wire.size(0), pb).copy_(wire[:, nb:]).view(params).float()
    return dequantize(unpack(wire[:, :nb], bits, features), p[:, 0], p[:, 1], dtype)
