"""GAT (single head per layer by default): attention over in-neighbours plus a self-loop."""
from __future__ import annotations

import torch
from torch_geometric.nn import GATConv

from ..data.local_graph import LocalPart
from .base import GNN, GraphView, local_edges
from .features import is_lazy, linear_blocks


class GAT(GNN):
    heads = 1
    # the first layer's linear map runs on its (sparse) input rows directly, as GCN's does
    sparse_input = True
    lazy_input = True
    normalize_by_default = True  # as the committed suites run it (base.py)

    def make_conv(self, in_dim, out_dim):
        # self-loops are already in the view's edge list (inner rows only)
        return GATConv(in_dim, out_dim, heads=self.heads, add_self_loops=False)

    def conv(self, layer, h, halo, view):
        c = self.convs[layer]
        if not is_lazy(h):
            # the module itself: its forward hooks see the edge list (BNS-GCN drops edges there)
            return c(self.all_rows(h, halo), view.edge_index)[: view.n_inner]
        # sparse or lazily dropped input rows (the first layer): GATConv.forward without
        # self-loops, edge features or residual, on its own parameters, so that the input rows
        # stay sparse and attention runs only towards the inner rows it produces
        H, C = c.heads, c.out_channels
        inner, rows = linear_blocks(c.lin.weight, h, halo)
        x_src, x_dst = self.all_rows(inner, rows).view(-1, H, C), inner.view(-1, H, C)
        size = (view.n_cols, view.n_inner)
        alpha = c.edge_updater(view.edge_index, alpha=((x_src * c.att_src).sum(-1),
                                                       (x_dst * c.att_dst).sum(-1)),
                               edge_attr=None, size=size)
        out = c.propagate(view.edge_index, x=(x_src, x_dst), alpha=alpha, size=size)
        out = out.reshape(-1, H * C) if c.concat else out.mean(dim=1)
        return out if c.bias is None else out + c.bias

    @staticmethod
    def view(part: LocalPart, induced: bool = False) -> GraphView:
        src, dst, n_cols = local_edges(part, induced)
        loops = torch.arange(part.n_inner)
        ei = torch.stack([torch.cat([src, loops]), torch.cat([dst, loops])])
        return GraphView(part.n_inner, n_cols, edge_index=ei)
