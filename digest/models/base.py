"""The abstract partition-parallel GNN: L convolutions, each reading inner + halo rows and writing
inner rows. Where the halo rows come from is the halo policy's business, not the model's."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..local_graph import LocalPart


@dataclass
class GraphView:
    """The local graph one convolution runs on (built once per worker, reused every step).

    Args:
        n_inner: rows produced. n_cols: rows read (n_inner, or n_inner + n_halo).
        adj: sparse CSR ``[n_inner, n_cols]`` (SAGE: ones), or for ``spmm`` (GCN) its inner block
            ``[n_inner, n_inner]``; or None.
        adj_halo: for ``spmm``, the halo block ``[n_inner, n_halo]``, or None (no halo).
        edge_index: ``[2, E]`` local (src, dst) including self-loops of inner rows (GAT), or None.
        adj_t, adj_halo_t: the blocks' transposes (CSR), built once: the backward of a sparse
            product then needs no per-step transpose (a sort of every edge).
    """

    n_inner: int
    n_cols: int
    adj: Tensor | None = None
    edge_index: Tensor | None = None
    adj_t: Tensor | None = None
    adj_halo: Tensor | None = None
    adj_halo_t: Tensor | None = None


def local_edges(part: LocalPart, induced: bool) -> tuple[Tensor, Tensor, int]:
    """(src, dst, n_cols) of the local graph; ``induced`` drops every edge from a halo row."""
    src, dst = part.edge_index
    if induced:
        keep = src < part.n_inner
        return src[keep], dst[keep], part.n_inner
    return src, dst, part.n_inner + part.n_halo


def csr(src: Tensor, dst: Tensor, value: Tensor, n_rows: int, n_cols: int) -> Tensor:
    """Sparse CSR ``[n_rows, n_cols]`` with ``value`` at (dst, src): row v aggregates its sources."""
    coo = torch.sparse_coo_tensor(torch.stack([dst, src]), value, (n_rows, n_cols), check_invariants=False)
    return coo.coalesce().to_sparse_csr()


def csr_tensor(crow: Tensor, col: Tensor, values: Tensor, shape) -> Tensor:
    """A CSR tensor from its parts, which this module builds consistent: no invariant check (and
    no warning that the check is off)."""
    return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


def csr32(t: Tensor) -> Tensor:
    """The same CSR tensor with int32 indices when they fit: MKL's sparse kernels take int32, so
    int64 indices would be converted on every product."""
    if t.layout != torch.sparse_csr or t.crow_indices().dtype == torch.int32 or \
            t.values().numel() >= 2**31 - 1 or max(t.shape) >= 2**31 - 1:
        return t
    return csr_tensor(t.crow_indices().int(), t.col_indices().int(), t.values(), t.shape)


def sparse_mm(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for sparse CSR ``a`` and dense ``b`` into a new (uninitialised) buffer: the same
    MKL kernel as ``torch.sparse.mm`` without its zero fill of the result and the copy out of a
    temporary (measured ~1.4x faster)."""
    out = b.new_empty((a.size(0), b.size(1)))
    return out.addmm_(a, b, beta=0)  # in place: addmm(out=) would first copy out onto itself


class _SpMM(torch.autograd.Function):
    """``adj @ inner + adj_halo @ halo`` with the backward ``adj_t @ grad`` and
    ``adj_halo_t @ grad``, all sparse-dense products (the sparse blocks are constants). Each
    gradient is computed only when its input needs one: DIGEST's stale halo rows need none."""

    @staticmethod
    def forward(ctx, inner: Tensor, halo: Tensor | None, view: GraphView) -> Tensor:
        ctx.view, ctx.halo_rows = view, None if halo is None else halo.size(0)
        out = sparse_mm(view.adj, inner)
        if halo is not None and halo.size(0):
            out.addmm_(view.adj_halo, halo)  # beta = 1: accumulate into the inner block's sum
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        view, grad = ctx.view, grad.contiguous()
        g_inner = sparse_mm(view.adj_t, grad) if ctx.needs_input_grad[0] else None
        g_halo = None
        if ctx.needs_input_grad[1]:  # the exact halo: its gradient goes back to the owners
            g_halo = sparse_mm(view.adj_halo_t, grad) if ctx.halo_rows else \
                grad.new_zeros((0, grad.size(1)))
        return g_inner, g_halo, None


def spmm(view: GraphView, inner: Tensor, halo: Tensor | None = None) -> Tensor:
    """``[adj | adj_halo] @ [inner; halo]`` without concatenating the rows: shapes
    ``[n_inner, F]`` and ``[n_halo, F]`` (or None) -> ``[n_inner, F]``. A halo with no rows
    still takes part, so that the backward of the exchange that produced it (a collective) runs."""
    if halo is not None and halo.size(0) and view.adj_halo is None:
        raise ValueError("halo rows given to a view without a halo block")
    return _SpMM.apply(inner, halo, view)


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
    ``SparseFeatures`` (likewise). On CPU the mask comes from ``keep_mask`` (see above)."""
    if not training or p == 0:
        return x
    if isinstance(x, SparseFeatures):
        return x.dropout(p)
    if x.is_sparse:
        x = x.coalesce()
        return torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), p, True), x.shape,
                                       check_invariants=False)
    if x.device.type != "cpu":
        return F.dropout(x, p, True)
    return _Masked.apply(x, *float_keep_mask(x.shape, p, x.device, x.dtype))


class _DropoutLinear(torch.autograd.Function):
    """``dropout(x) @ W^T`` for a constant dense ``x`` (the input features): saves the bool mask
    (1 byte per element) instead of the dropped float copy (4 bytes) and recomputes the copy for
    the weight gradient, so the first layer keeps no second copy of the features."""

    @staticmethod
    def forward(ctx, weight: Tensor, x: Tensor, mask: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(x, mask)
        ctx.scale = scale
        return (x.mul(mask) @ weight.t()).mul_(scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, mask = ctx.saved_tensors
        return (grad.t() @ x.mul(mask)).mul_(ctx.scale), None, None, None


class DroppedRows:
    """Dense constant rows with a dropout mask not yet applied; ``linear`` applies both."""

    def __init__(self, x: Tensor, p: float):
        self.x = x
        self.mask, self.scale = keep_mask(x.shape, p, x.device)

    def linear(self, weight: Tensor) -> Tensor:
        return _DropoutLinear.apply(weight, self.x, self.mask, self.scale)


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


class GNN(nn.Module):
    """Base model. Subclasses build ``self.convs`` in ``make_conv`` and say how to run one.

    Args:
        in_dim, hidden, out_dim: widths. layers: L >= 1. dropout: p. batch_norm: per hidden layer
        (statistics of the worker's inner rows only; off by default so runs stay exact).
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int = 3,
                 dropout: float = 0.5, batch_norm: bool = False):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.convs = nn.ModuleList(self.make_conv(i, o) for i, o in zip(dims[:-1], dims[1:]))
        self.norms = nn.ModuleList(nn.BatchNorm1d(d) if batch_norm else nn.Identity()
                                   for d in dims[1:-1])
        self.p = dropout
        self.widths = dims  # widths[l] = columns of h^l, what crosses the wire before layer l

    sparse_input = False  # True: the first layer takes sparse features as they are
    # True: ``conv(0, h)`` accepts ``DroppedRows`` (dense constant inputs with their dropout mask,
    # applied inside its linear map) and ``SparseFeatures``, via ``h.linear(weight)``
    lazy_input = False

    @classmethod
    def features(cls, x: Tensor):
        """Input rows as the first layer takes them: sparse inputs become ``SparseFeatures`` when
        it can use them (``sparse_input``), dense rows otherwise."""
        if not x.is_sparse and x.layout != torch.sparse_csr:
            return x
        return SparseFeatures(x) if cls.sparse_input else x.to_dense()

    @classmethod
    def inputs(cls, x: Tensor, n_inner: int) -> tuple:
        """What ``forward`` takes as ``x``: (inner rows, halo rows or None) of the input features
        ``x [n_inner + n_halo, F_in]``."""
        x = cls.features(x)
        n = x.size(0)
        if isinstance(x, SparseFeatures):
            return x.rows(0, n_inner), (x.rows(n_inner, n) if n > n_inner else None)
        return x[:n_inner], (x[n_inner:] if n > n_inner else None)

    def make_conv(self, in_dim: int, out_dim: int) -> nn.Module:  # pragma: no cover
        raise NotImplementedError

    def conv(self, layer: int, h: Tensor, halo: Tensor | None,
             view: GraphView) -> Tensor:  # pragma: no cover
        """Layer ``layer`` on inner rows ``h [n_inner, F]`` and halo rows ``[n_halo, F]`` (None:
        no halo); returns inner rows ``[n_inner, F']``."""
        raise NotImplementedError

    @staticmethod
    def all_rows(h: Tensor, halo: Tensor | None) -> Tensor:
        """Inner then halo rows in one tensor, for convolutions that index them together."""
        return h if halo is None else torch.cat([h, halo])

    @staticmethod
    def view(part: LocalPart, induced: bool = False) -> GraphView:  # pragma: no cover
        raise NotImplementedError

    def forward(self, x: tuple, view: GraphView, halo) -> Tensor:
        """Args:
            x: ``inputs(...)``: input rows ``[n_inner, F_in]`` and ``[n_halo, F_in]`` or None
                (halo features, fetched once at start-up).
            halo: ``halo(layer, h_inner) -> [n_halo, F]`` or None, the halo policy.
        Returns logits ``[n_inner, C]``."""
        h, rows = x
        for layer in range(len(self.convs)):
            if layer > 0:
                rows = halo(layer, h)  # post-activation, pre-dropout rows cross the wire
            h = self.conv(layer, self._drop(layer, h), self._drop(layer, rows), view)
            if layer < len(self.convs) - 1:
                h = F.relu(self.norms[layer](h))
        return h

    def _drop(self, layer: int, h):
        if h is None:
            return None
        if layer == 0 and self.lazy_input and self.training and self.p > 0 and \
                isinstance(h, Tensor) and not h.requires_grad and h.device.type == "cpu":
            return DroppedRows(h, self.p)
        return dropout(h, self.p, self.training)
