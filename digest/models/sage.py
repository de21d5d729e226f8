"""GraphSAGE with mean aggregation: the mean over in-neighbours needs no global degree, only an
exact halo, because every in-neighbour of an inner node is inner or halo."""
from __future__ import annotations

import torch
from torch_geometric.nn import SAGEConv

from ..data.local_graph import LocalPart
from .base import GNN, GraphView, local_edges
from .features import is_lazy, linear_blocks
from .sparse import blocks, spmm


class SAGE(GNN):
    # the mean is linear, so the first layer can transform its (sparse) inputs first, as GCN's does
    sparse_input = True
    lazy_input = True
    normalize_by_default = True  # raw bag-of-words rows blow up its first step (base.py)

    def make_conv(self, in_dim, out_dim):
        return SAGEConv(in_dim, out_dim, aggr="mean")

    def conv(self, layer, h, halo, view):
        # SAGEConv.forward (mean, root weight) is lin_l(mean_j h_j) + lin_r(h_i); done here with its
        # own parameters, as GCN's is, so that the mean is the view's sparse product with its
        # precomputed transposes and sparse inputs stay sparse (a dense 6,805-wide first layer on
        # CS made an epoch 10x GCN's)
        c = self.convs[layer]
        root = linear_blocks(c.lin_r.weight, h)[0]
        if not is_lazy(h) and c.lin_l.in_channels <= c.lin_l.out_channels:
            return c.lin_l(spmm(view, h, halo)) + root  # aggregate first: the narrow side
        # transform first (mean_j h_j W^T = (mean_j h_j) W^T): sparse or lazily dropped inputs,
        # or the sparse product on the narrow side
        return spmm(view, *linear_blocks(c.lin_l.weight, h, halo)) + c.lin_l.bias + root

    @staticmethod
    def view(part: LocalPart, induced: bool = False) -> GraphView:
        src, dst, n_cols = local_edges(part, induced)
        # weights 1 / in-degree of the local graph: every in-neighbour of an inner row is local
        # (the exact view), or only the inner ones count (induced, partition-based)
        deg = torch.bincount(dst, minlength=part.n_inner).float()
        return GraphView(part.n_inner, n_cols, **blocks(src, dst, 1.0 / deg[dst], part.n_inner,
                                                         n_cols))
