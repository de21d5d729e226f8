"""GCN (Kipf & Welling) with GLOBAL-degree normalisation D^-1/2 (A+I) D^-1/2 (docs/methods.md
section 1)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv

from ..data.local_graph import LocalPart
from .base import GNN, GraphView, local_edges
from .features import is_lazy, linear_blocks
from .sparse import blocks, spmm


class GCN(GNN):
    # (X W) first: a sparse X makes the first layer a sparse-dense product, no dense X needed
    sparse_input = True
    lazy_input = True

    def make_conv(self, in_dim, out_dim):
        # weights are precomputed in the view, so PyG must not renormalise or add self-loops
        return GCNConv(in_dim, out_dim, normalize=False, add_self_loops=False, cached=False)

    def conv(self, layer, h, halo, view):
        # GCNConv.forward with normalize=False on a sparse adjacency is lin -> adj @ . -> + bias;
        # done here with its own parameters so that sparse inputs stay sparse (SparseFeatures),
        # inner and halo rows are never concatenated, and the backward uses the view's
        # precomputed transposes (no per-step sort) and skips constant (stale) halo rows.
        c = self.convs[layer]
        if not is_lazy(h) and c.lin.in_channels <= c.lin.out_channels:
            # aggregate first: the dense product then runs on the n_inner aggregated rows instead
            # of all n_inner + n_halo input rows (A (H W) = (A H) W; the sparse product costs
            # nnz x width either way when the widths are equal)
            return F.linear(spmm(view, h, halo), c.lin.weight, c.bias)  # bias in the same kernel
        # transform first: sparse or lazily dropped inputs, or the sparse product on the narrow side
        out = spmm(view, *linear_blocks(c.lin.weight, h, halo))
        return out + c.bias if c.bias is not None else out

    @staticmethod
    def view(part: LocalPart, induced: bool = False) -> GraphView:
        src, dst, n_cols = local_edges(part, induced)
        if induced:  # partition-based: degrees of the induced subgraph
            deg = torch.bincount(dst, minlength=part.n_inner).double() + 1
        else:
            deg = part.deg.double() + 1  # +1: the self-loop GCN adds
        # in place: each [E] float64 temporary is 0.24 GB at products size
        w = deg[src]
        w.mul_(deg[dst]).rsqrt_()
        loops = torch.arange(part.n_inner)
        src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
        w = torch.cat([w, 1.0 / deg[loops]]).float()
        return GraphView(part.n_inner, n_cols, **blocks(src, dst, w, part.n_inner, n_cols))
