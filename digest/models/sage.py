"""GraphSAGE with mean aggregation: the mean over in-neighbours needs no global degree, only an
exact halo, because every in-neighbour of an inner node is inner or halo."""
from __future__ import annotations

import torch
from torch_geometric.nn import SAGEConv

from ..local_graph import LocalPart
from .base import GNN, GraphView, local_edges
from .sparse import csr


class SAGE(GNN):
    def make_conv(self, in_dim, out_dim):
        return SAGEConv(in_dim, out_dim, aggr="mean")

    def conv(self, layer, h, halo, view):
        # bipartite form: aggregate from all local rows, root weight on the inner rows
        return self.convs[layer]((self.all_rows(h, halo), h), view.adj)

    @staticmethod
    def view(part: LocalPart, induced: bool = False) -> GraphView:
        src, dst, n_cols = local_edges(part, induced)
        ones = torch.ones(src.numel())
        return GraphView(part.n_inner, n_cols, adj=csr(src, dst, ones, part.n_inner, n_cols))
