"""The abstract partition-parallel GNN: L convolutions, each reading inner + halo rows and writing
inner rows. Where the halo rows come from is the halo policy's business, not the model's."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..part import LocalPart


@dataclass
class GraphView:
    """The local graph one convolution runs on (built once per worker, reused every step).

    Args:
        n_inner: rows produced. n_cols: rows read (n_inner, or n_inner + n_halo).
        adj: sparse CSR ``[n_inner, n_cols]`` (GCN: normalised weights; SAGE: ones), or None.
        edge_index: ``[2, E]`` local (src, dst) including self-loops of inner rows (GAT), or None.
    """

    n_inner: int
    n_cols: int
    adj: Tensor | None = None
    edge_index: Tensor | None = None


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


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout that also works on sparse COO inputs (on their stored values)."""
    if not training or p == 0:
        return x
    if x.is_sparse:
        x = x.coalesce()
        return torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), p, True), x.shape,
                                       check_invariants=False)
    return F.dropout(x, p, True)


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

    sparse_input = False  # True: the first layer takes sparse COO features as they are

    def make_conv(self, in_dim: int, out_dim: int) -> nn.Module:  # pragma: no cover
        raise NotImplementedError

    def conv(self, layer: int, h: Tensor, view: GraphView) -> Tensor:  # pragma: no cover
        """Layer ``layer`` on rows ``[view.n_cols, F]``; returns inner rows ``[n_inner, F']``."""
        raise NotImplementedError

    @staticmethod
    def view(part: LocalPart, induced: bool = False) -> GraphView:  # pragma: no cover
        raise NotImplementedError

    def forward(self, x: Tensor, view: GraphView, halo) -> Tensor:
        """Args:
            x: input rows ``[n_cols, F_in]`` (inner + halo features, fetched once at start-up).
            halo: ``halo(layer, h_inner) -> [n_cols, F]``, the halo policy.
        Returns logits ``[n_inner, C]``."""
        h = x
        for layer in range(len(self.convs)):
            if layer > 0:
                h = halo(layer, h)  # post-activation, pre-dropout rows cross the wire
            h = self.conv(layer, dropout(h, self.p, self.training), view)
            if layer < len(self.convs) - 1:
                h = F.relu(self.norms[layer](h))
        return h
