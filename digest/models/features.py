"""``SparseFeatures``: low-density input features kept sparse (CSR with its transpose structure),
their dropout over the stored values only, and the first layer's ``X @ W^T`` for several row
blocks with one weight (``sparse_linear``; ``linear_blocks`` for any kind of rows).

Shapes: ``SparseFeatures.csr [n, F]``; ``sparse_linear(W [F', F], X_1 [n_1, F], ...)`` gives
``([n_1, F'], ...)``."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .dropout import DroppedRows, keep_mask
from .sparse import csr32, csr_tensor, sparse_mm


class _SparseLinear(torch.autograd.Function):
    """``X_i @ W^T`` for constant sparse row blocks X_i (CSR; a worker's inner and halo input rows)
    with one weight: W^T is made contiguous once for all blocks (MKL would copy a transposed
    operand per product), and the weight gradient ``(sum_i X_i^T @ G_i)^T`` accumulates every
    block into one buffer, transposed once. X_i^T's structure is computed once, so neither
    direction sorts anything per step."""

    @staticmethod
    def forward(ctx, weight: Tensor, *feats: "SparseFeatures") -> tuple[Tensor, ...]:
        ctx.feats = feats
        wt = weight.t().contiguous()
        return tuple(sparse_mm(f.csr, wt) for f in feats)

    @staticmethod
    def backward(ctx, *grads: Tensor):
        gwt = None
        for f, g in zip(ctx.feats, grads):
            if g is None:
                continue
            if gwt is None:
                gwt = sparse_mm(f.csr_t(), g.contiguous())
            else:
                gwt.addmm_(f.csr_t(), g.contiguous())  # beta = 1: accumulate in place
        return (None if gwt is None else gwt.t().contiguous()), *([None] * len(grads))


def sparse_linear(weight: Tensor, *feats: "SparseFeatures") -> tuple[Tensor, ...]:
    """``f @ weight^T`` for every ``SparseFeatures`` block f: ``[n_i, F] x [F', F] -> [n_i, F']``,
    one autograd node for all blocks (see ``_SparseLinear``)."""
    return _SparseLinear.apply(weight, *feats)


def is_lazy(h) -> bool:
    """Whether input rows are read only through a linear map (``h.linear(weight)``): sparse
    features, or dense rows whose dropout is applied inside the product."""
    return isinstance(h, (SparseFeatures, DroppedRows))


def linear_blocks(weight: Tensor, h, halo=None) -> tuple:
    """``(h W^T, halo W^T)``, no bias, for one layer's inner rows and halo rows (None stays None):
    sparse blocks share one node (``sparse_linear``), lazily dropped rows (``DroppedRows``) apply
    their mask inside the product, dense rows take a plain linear map."""
    blocks = [h] if halo is None else [h, halo]
    if all(isinstance(b, SparseFeatures) for b in blocks):
        outs = sparse_linear(weight, *blocks)
    else:
        outs = [b.linear(weight) if is_lazy(b) else F.linear(b, weight) for b in blocks]
    return outs[0], (outs[1] if halo is not None else None)


def _offsets(index: Tensor, size: int, dtype) -> Tensor:
    """CSR row offsets ``[size + 1]`` of entries whose (sorted) row ids are ``index``."""
    out = torch.zeros(size + 1, dtype=dtype, device=index.device)
    out[1:] = torch.cumsum(torch.bincount(index, minlength=size), 0)
    return out


class SparseFeatures:
    """Low-density input features kept sparse: CSR ``[n, F]`` (int32 indices where they fit) and
    the structure of its transpose with the permutation that maps values into it. Dropout draws a
    mask over the stored values only and keeps only the surviving entries (rows and transpose),
    so the first layer, ``linear`` (two sparse-dense products), skips the dropped ones.

    Shapes: ``csr [n, F]``; ``t_crow [F + 1]``, ``t_col [nnz]``, ``perm [nnz]``, ``row [nnz]``."""

    def __init__(self, x: Tensor, _t=None):
        if x.layout == torch.sparse_coo:
            x = x.coalesce().to_sparse_csr()
        self.csr = csr32(x)
        n, f = self.csr.shape
        crow, col = self.csr.crow_indices(), self.csr.col_indices()
        self.row = torch.repeat_interleave(torch.arange(n, dtype=col.dtype, device=col.device),
                                           crow.diff().long())  # the row of each stored entry
        if _t is None:
            perm = torch.sort(col, stable=True).indices  # column-major order, rows ascending
            _t = (_offsets(col, f, crow.dtype), self.row[perm], perm)
        self.t_crow, self.t_col, self.perm = _t
        self.t_values = None  # values in transposed order, when held instead of ``perm``

    @property
    def shape(self):
        return self.csr.shape

    def size(self, dim=None):
        return self.csr.size() if dim is None else self.csr.size(dim)

    def values(self) -> Tensor:
        return self.csr.values()

    def with_values(self, values: Tensor) -> "SparseFeatures":
        c = self.csr
        out = SparseFeatures.__new__(SparseFeatures)
        out.csr = csr_tensor(c.crow_indices(), c.col_indices(), values, c.shape)
        out.t_crow, out.t_col, out.perm, out.t_values = self.t_crow, self.t_col, self.perm, None
        out.row = self.row
        return out

    def csr_t(self) -> Tensor:
        """X^T ``[F, n]`` as CSR, with the current values."""
        n, f = self.csr.shape
        values = self.t_values if self.t_values is not None else self.values()[self.perm]
        return csr_tensor(self.t_crow, self.t_col, values, (f, n))

    def dropout(self, p: float) -> "SparseFeatures":
        v = self.values()
        if v.device.type != "cpu":
            return self.with_values(F.dropout(v, p, True))
        keep, scale = keep_mask(v.shape, p, v.device)
        return self.kept(keep, scale)

    def kept(self, keep: Tensor, scale: float = 1.0) -> "SparseFeatures":
        """Only the stored entries where ``keep`` (bool ``[nnz]``) holds, times ``scale``, with
        their transpose: the dropped entries are zeros, so both products of the first layer
        skip them (p = 0.5 halves their work; the compaction is a few passes over nnz)."""
        c = self.csr
        n, f = c.shape
        # one nonzero per order, then index_select (bool-mask indexing would redo the nonzero)
        idx = keep.nonzero().squeeze(1)
        col = c.col_indices().index_select(0, idx)
        crow = _offsets(self.row.index_select(0, idx), n, c.crow_indices().dtype)
        t_perm = self.perm.index_select(0, keep.index_select(0, self.perm).nonzero().squeeze(1))
        out = SparseFeatures.__new__(SparseFeatures)
        out.csr = csr_tensor(crow, col, c.values().index_select(0, idx).mul_(scale), (n, f))
        out.t_crow, out.perm = _offsets(col, f, crow.dtype), None
        out.t_col = self.row.index_select(0, t_perm)
        out.t_values = c.values().index_select(0, t_perm).mul_(scale)
        return out

    def linear(self, weight: Tensor) -> Tensor:
        """``X @ weight^T``: ``[n, F] x [F', F] -> [n, F']``."""
        return sparse_linear(weight, self)[0]

    def rows(self, start: int, stop: int) -> "SparseFeatures":
        """Rows ``start:stop`` (with their own transpose structure)."""
        c = self.csr
        crow = c.crow_indices()[start: stop + 1]
        lo, hi = int(crow[0]), int(crow[-1])
        return SparseFeatures(csr_tensor(crow - lo, c.col_indices()[lo:hi], c.values()[lo:hi],
                                         (stop - start, c.size(1))))

    def to_dense(self) -> Tensor:
        return self.csr.to_dense()

    def to(self, device) -> "SparseFeatures":
        c = self.csr
        if c.device == torch.device(device):
            return self
        return SparseFeatures(c.to(device), tuple(t.to(device) for t in
                                                  (self.t_crow, self.t_col, self.perm)))
