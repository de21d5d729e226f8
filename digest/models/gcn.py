"""GCN (Kipf & Welling) with GLOBAL-degree normalisation D^-1/2 (A+I) D^-1/2 (METHODS.md section 1)."""
from __future__ import annotations

import torch
from torch_geometric.nn import GCNConv

from ..part import LocalPart
from .base import GNN, GraphView, csr, local_edges


class GCN(GNN):
    # (X W) first: a sparse X makes the first layer a sparse-dense product, no dense X needed
    sparse_input = True

    def make_conv(self, in_dim, out_dim):
        # weights are precomputed in the view, so PyG must not renormalise or add self-loops
        return GCNConv(in_dim, out_dim, normalize=False, add_self_loops=False, cached=False)

    def conv(self, layer, h, view):
        return self.convs[layer](h, view.adj)

    @staticmethod
    def view(part: LocalPart, induced: bool = False) -> GraphView:
        src, dst, n_cols = local_edges(part, induced)
        if induced:  # partition-based: degrees of the induced subgraph
            deg = torch.bincount(dst, minlength=part.n_inner).double() + 1
        else:
            deg = part.deg.double() + 1  # +1: the self-loop GCN adds
        w = (deg[src] * deg[dst]).rsqrt()
        loops = torch.arange(part.n_inner)
        src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
        w = torch.cat([w, 1.0 / deg[loops]]).float()
        return GraphView(part.n_inner, n_cols, adj=csr(src, dst, w, part.n_inner, n_cols))
