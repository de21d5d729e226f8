"""The abstract partition-parallel GNN: L convolutions, each reading inner + halo rows and writing
inner rows. Where the halo rows come from is the halo policy's business, not the model's.

The kernels it runs on live beside it: ``sparse.py`` (CSR helpers, ``spmm``), ``dropout.py``
(masks, ``dropout``, ``DroppedRows``) and ``features.py`` (``SparseFeatures``)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.local_graph import LocalPart
from .dropout import DroppedRows, dropout
from .features import SparseFeatures


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
    # --normalize-features unset: row-normalise non-negative (bag-of-words) input features?
    # (docs/deviations.md; measured first Adam steps at lr 0.01, 3 x 256, one worker: SAGE's train loss
    # jumps on every raw bag-of-words graph here, 2.14 -> 34.2 on Photo, 2.70 -> 6.46 on CS,
    # 1.62 -> 5.59 on Physics; GCN's falls on CS and Physics and jumps on Photo, 2.13 -> 10.7,
    # then recovers; GAT's rises by 8-16% on CS and Photo. The committed suites normalise for SAGE
    # and GAT and not for GCN: these defaults are theirs.)
    normalize_by_default = False

    @classmethod
    def normalizes(cls, flag: bool | None, nonnegative: bool) -> bool:
        """Whether the input rows are row-normalised: ``--normalize-features`` when given, else
        this model's default where every input feature is >= 0."""
        return bool(flag) if flag is not None else cls.normalize_by_default and nonnegative

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
