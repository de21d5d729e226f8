"""Dropout kernels: Bernoulli masks from 16-bit random lanes (``keep_mask``, ``float_keep_mask``),
inverted dropout on dense rows, sparse COO inputs and ``SparseFeatures`` (``dropout``), and the
first layer's ``dropout(x) @ W^T`` that saves a bool mask instead of the dropped copy
(``DroppedRows``).

Shapes: masks have the shape asked for; ``dropout`` returns its input's shape; ``DroppedRows(x)``
with ``x [n, F]`` and ``linear(W [F', F])`` gives ``[n, F']``."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# Dropout masks from 16-bit uniform integers: full-range random int64 words viewed as four int16
# lanes each, so one draw of the CPU generator serves four elements (measured 3-4x cheaper than
# int16 draws, 4-8x cheaper than bernoulli_ on floats). p is rounded to a multiple of 2^-16 and the
# scale uses the rounded keep probability, so the mask stays unbiased.
_LEVELS = 1 << 16


def _lanes(shape, p: float, device=None) -> tuple[Tensor, int, float]:
    """Uniform int16 lanes of ``shape``, the threshold at or above which a lane is kept, and the
    inverse keep probability."""
    drop = min(int(round(p * _LEVELS)), _LEVELS - 1)
    n = 1
    for s in shape:
        n *= int(s)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-2**63, None)
    lanes = words.view(torch.int16)[:n].view(shape)  # uniform in [-2^15, 2^15)
    return lanes, drop - (1 << 15), _LEVELS / (_LEVELS - drop)


def keep_mask(shape, p: float, device=None) -> tuple[Tensor, float]:
    """A Bernoulli(1 - p) bool mask of ``shape`` and the inverse keep probability."""
    lanes, threshold, scale = _lanes(shape, p, device)
    return lanes >= threshold, scale


def float_keep_mask(shape, p: float, device=None, dtype=torch.float32) -> tuple[Tensor, float]:
    """The same draw as ``keep_mask`` as a float mask of 0 and 1 (the comparison writes floats
    directly: measured ~3x cheaper than a bool mask converted), and the inverse keep probability,
    which the product with the mask applies (``_Masked``), so the mask needs no pass of its own."""
    lanes, threshold, scale = _lanes(shape, p, device)
    out = torch.empty(shape, dtype=dtype, device=device)
    return torch.ge(lanes, threshold, out=out), scale


def _scaled_product(x: Tensor, mask: Tensor, scale: float) -> Tensor:
    """``x * mask * scale`` in one pass (addcmul onto a broadcast zero)."""
    return torch.addcmul(x.new_zeros(()), x, mask, value=scale)


class _Masked(torch.autograd.Function):
    """``x * mask * scale`` where ``mask`` (float 0 or 1) and ``scale`` are constants."""

    @staticmethod
    def forward(ctx, x: Tensor, mask: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return _scaled_product(x, mask, scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (mask,) = ctx.saved_tensors
        return _scaled_product(grad, mask, ctx.scale), None, None


def dropout(x, p: float, training: bool):
    """Inverted dropout on dense rows, on sparse COO inputs (on their stored values) and on
    ``SparseFeatures`` (likewise, through its own ``dropout(p)``: any input that is not a tensor
    is such an object, so this module needs no import of ``features.py``, which imports it). On
    CPU the mask comes from ``keep_mask`` (see above)."""
    if not training or p == 0:
        return x
    if not isinstance(x, Tensor):  # SparseFeatures
        return x.dropout(p)
    if x.is_sparse:
        x = x.coalesce()
        return torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), p, True), x.shape,
                                       check_invariants=False)
    if x.device.type != "cpu":
        return F.dropout(x, p, True)
    return _Masked.apply(x, *float_keep_mask(x.shape, p, x.device, x.dtype))


# rows of the dropped copy made at a time: the copy of a worker's whole input block would be
# 0.8 GB at products size (2M local rows x 100 features), a block of these 26 MB
CHUNK_ROWS = 1 << 16


class _DropoutLinear(torch.autograd.Function):
    """``dropout(x) @ W^T`` for a constant dense ``x`` (the input features): saves the bool mask
    (1 byte per element) instead of the dropped float copy (4 bytes) and recomputes the copy for
    the weight gradient, so the first layer keeps no second copy of the features; the copy is
    made ``CHUNK_ROWS`` rows at a time, so not even a transient one of all rows."""

    @staticmethod
    def forward(ctx, weight: Tensor, x: Tensor, mask: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(x, mask)
        ctx.scale = scale
        out = x.new_empty((x.size(0), weight.size(0)))
        for i in range(0, x.size(0), CHUNK_ROWS):
            torch.mm(x[i:i + CHUNK_ROWS].mul(mask[i:i + CHUNK_ROWS]), weight.t(),
                     out=out[i:i + CHUNK_ROWS])
        return out.mul_(scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, mask = ctx.saved_tensors
        gw = grad.new_zeros((grad.size(1), x.size(1)))
        for i in range(0, x.size(0), CHUNK_ROWS):
            gw.addmm_(grad[i:i + CHUNK_ROWS].t(), x[i:i + CHUNK_ROWS].mul(mask[i:i + CHUNK_ROWS]))
        return gw.mul_(ctx.scale), None, None, None


class DroppedRows:
    """Dense constant rows with a dropout mask not yet applied; ``linear`` applies both."""

    def __init__(self, x: Tensor, p: float):
        self.x = x
        self.mask, self.scale = keep_mask(x.shape, p, x.device)

    def linear(self, weight: Tensor) -> Tensor:
        return _DropoutLinear.apply(weight, self.x, self.mask, self.scale)
