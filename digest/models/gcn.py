"""GCN (Kipf & Welling) with GLOBAL-degree normalisation D^-1/2 (A+I) D^-1/2 (METHODS.md section 1)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv

from ..local_graph import LocalPart
from .base import GNN, GraphView, local_edges
from .dropout import DroppedRows
from .features import SparseFeatures, sparse_linear
from .sparse import csr, csr32, spmm


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
        if not isinstance(h, (SparseFeatures, DroppedRows)) and \
                c.lin.in_channels <= c.lin.out_channels:
            # aggregate first: the dense product then runs on the n_inner aggregated rows instead
            # of all n_inner + n_halo input rows (A (H W) = (A H) W; the sparse product costs
            # nnz x width either way when the widths are equal)
            return F.linear(spmm(view, h, halo), c.lin.weight, c.bias)  # bias in the same kernel
        # transform first: sparse or lazily dropped inputs, or the sparse product on the narrow side
        out = spmm(view, *_linear(c, h, halo))
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
        n = part.n_inner
        inner = src < n  # the inner block [n, n] and the halo block [n, n_cols - n]
        view = GraphView(n, n_cols, adj=csr32(csr(src[inner], dst[inner], w[inner], n, n)),
                         adj_t=csr32(csr(dst[inner], src[inner], w[inner], n, n)))
        if n_cols > n:
            hs, hd, hw = src[~inner] - n, dst[~inner], w[~inner]
            view.adj_halo = csr32(csr(hs, hd, hw, n, n_cols - n))
            view.adj_halo_t = csr32(csr(hd, hs, hw, n_cols - n, n))
        return view


def _linear(c: GCNConv, h, halo) -> tuple:
    """``(h W^T, halo W^T)`` with the layer's weight (no bias; a None halo stays None). Sparse
    inner and halo blocks share one node (the weight transposed once, one gradient buffer); lazily
    dropped rows apply their mask inside their product."""
    blocks = [h] if halo is None else [h, halo]
    if all(isinstance(b, SparseFeatures) for b in blocks):
        outs = sparse_linear(c.lin.weight, *blocks)
    else:
        outs = [b.linear(c.lin.weight) if isinstance(b, (SparseFeatures, DroppedRows)) else c.lin(b)
                for b in blocks]
    return outs[0], (outs[1] if halo is not None else None)
