"""GAT (single head per layer by default): attention over in-neighbours plus a self-loop."""
from __future__ import annotations

import torch
from torch_geometric.nn import GATConv

from ..local_graph import LocalPart
from .base import GNN, GraphView, local_edges


class GAT(GNN):
    heads = 1

    def make_conv(self, in_dim, out_dim):
        # self-loops are already in the view's edge list (inner rows only)
        return GATConv(in_dim, out_dim, heads=self.heads, add_self_loops=False)

    def conv(self, layer, h, halo, view):
        return self.convs[layer](self.all_rows(h, halo), view.edge_index)[: view.n_inner]

    @staticmethod
    def view(part: LocalPart, induced: bool = False) -> GraphView:
        src, dst, n_cols = local_edges(part, induced)
        loops = torch.arange(part.n_inner)
        ei = torch.stack([torch.cat([src, loops]), torch.cat([dst, loops])])
        return GraphView(part.n_inner, n_cols, edge_index=ei)
