"""GCN (Kipf & Welling) with GLOBAL-degree normalisation D^-1/2 (A+I) D^-1/2 (METHODS.md section 1)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv

from ..part import LocalPart
from .base import GNN, DroppedRows, GraphView, SparseFeatures, csr, csr32, local_edges, spmm


class GCN(GNN):
    # (X W) first: a sparse X makes the first layer a sparse-dense product, no dense X needed
    sparse_input = True
    lazy_input = True

    def make_conv(self, in_dim, out_dim):
        # weights are precomputed in the view, so PyG must not renormalise or add self-loops
        return GCNConv(in_dim, out_dim, normalize=False, add_self_loops=False, cached=False)

    def conv(self, layer, h, view):
        # GCNConv.forward with normalize=False on a sparse adjacency is lin -> adj @ . -> + bias;
        # done here with its own parameters so that sparse inputs stay sparse (SparseFeatures)
        # and the backward uses the view's precomputed transpose (no per-step sort).
        c = self.convs[layer]
        if isinstance(h, (SparseFeatures, DroppedRows)):
            out = spmm(view, h.linear(c.lin.weight))
        elif c.lin.in_channels <= c.lin.out_channels:
            # aggregate first: the dense product then runs on the n_inner aggregated rows instead
            # of all n_inner + n_halo input rows (A (H W) = (A H) W; the sparse product costs
            # nnz x width either way when the widths are equal)
            return F.linear(spmm(view, h), c.lin.weight, c.bias)  # bias added by the same kernel
        else:
            out = spmm(view, c.lin(h))  # transform first: the sparse product on the narrow side
        return out + c.bias if c.bias is not None else out

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
        adj = csr32(csr(src, dst, w, part.n_inner, n_cols))
        adj_t = csr32(csr(dst, src, w, n_cols, part.n_inner))
        return GraphView(part.n_inner, n_cols, adj=adj, adj_t=adj_t)
