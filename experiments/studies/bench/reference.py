"""The plain PyG reference every performance ratio divides by: a single-process full-graph
torch_geometric GCN (dropout before every layer, ReLU between layers, ``GCNConv(cached=True)``),
trained with Adam. Its input features are dense, or a torch sparse CSR tensor (the first layer's
linear transform then a sparse-dense product); its adjacency is ``edge_index`` or a sparse CSR
adjacency. ``python -m experiments.studies.bench`` times it against our trainer; ``benchmarks/test_bench_epoch.py``
times it alone.

Shapes: ``graph.x [N, F]`` (dense or sparse COO, made dense or CSR), ``graph.edge_index [2, E]``;
logits ``[N, C]``."""
from __future__ import annotations

FEATURES = ("dense", "sparse")
ADJACENCY = ("edge_index", "sparse")


def dropout_any(x, p: float, training: bool):
    """``F.dropout`` on a dense tensor; on a sparse CSR tensor the same dropout applied to its
    stored values (a zero stays zero either way, a kept entry is scaled by 1 / (1 - p)), since
    ``F.dropout`` has no sparse CSR kernel. ``[N, F]`` in, the same layout out."""
    import torch
    import torch.nn.functional as F

    if x.layout != torch.sparse_csr:
        return F.dropout(x, p, training)
    if not training or p == 0:
        return x
    return torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(),
                                   F.dropout(x.values(), p, True), x.size())


def plain_gcn(in_dim: int, hidden: int, out_dim: int, layers: int = 3, dropout: float = 0.5):
    """A plain full-graph torch_geometric GCN (the reference every ratio divides by): dropout
    before every layer, ReLU between layers, ``GCNConv(cached=True)`` on ``edge_index`` or a sparse
    adjacency. ``x`` may be a sparse CSR tensor: GCNConv's own ``lin`` (PyG's ``Linear``, i.e.
    ``F.linear``) then computes the first layer's transform as a sparse-dense product, and the
    propagation that follows is unchanged (the library does it; no layer of ours)."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    class PlainGCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
            self.convs = torch.nn.ModuleList(GCNConv(a, b, cached=True)
                                             for a, b in zip(dims[:-1], dims[1:]))

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(dropout_any(x, dropout, self.training), edge_index)
                if i < len(self.convs) - 1:
                    x = F.relu(x)
            return x

    return PlainGCN()


def plain_setup(graph, hidden=256, layers=3, dropout=0.5, seed=0, adjacency="edge_index",
                features="dense"):
    """``(model, x, adj)`` of ``plain_gcn`` on ``graph``; the same seed gives the same weights
    whatever the layouts. ``features``: "dense" (``x [N, F]`` dense) or "sparse" (``x`` a torch
    sparse CSR ``[N, F]``). ``adjacency``: "edge_index" (PyG's gather/scatter message passing,
    examples/gcn.py) or "sparse" (a torch sparse CSR adjacency, PyG's ``ToSparseTensor`` route:
    one SpMM per layer)."""
    import torch

    if features not in FEATURES or adjacency not in ADJACENCY:
        raise ValueError(f"features must be one of {FEATURES} and adjacency one of {ADJACENCY}, "
                         f"got {features!r}, {adjacency!r}")
    x = graph.x
    if features == "dense":
        x = x.to_dense() if x.is_sparse else x
    else:
        x = (x.coalesce() if x.is_sparse else x.to_sparse_coo().coalesce()).to_sparse_csr()
    torch.manual_seed(seed)
    model = plain_gcn(x.size(1), hidden, graph.num_classes, layers, dropout)
    ei = graph.edge_index
    if adjacency == "sparse":  # adj_t (row = target); the graph is symmetric
        from torch_geometric.utils import to_torch_csr_tensor
        ei = to_torch_csr_tensor(ei.flip(0), size=(graph.num_nodes, graph.num_nodes))
    return model, x, ei


def plain_step_fn(graph, hidden=256, layers=3, dropout=0.5, lr=0.01, seed=0,
                  adjacency="edge_index", features="dense"):
    """``step()`` = one full-graph training step of ``plain_gcn`` on ``graph`` (Adam; the
    layouts as in ``plain_setup``)."""
    import torch
    import torch.nn.functional as F

    model, x, ei = plain_setup(graph, hidden, layers, dropout, seed, adjacency, features)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    y, mask = graph.y, graph.train_mask

    def step(epoch: int = 0) -> float:
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei)[mask], y[mask])
        loss.backward()
        opt.step()
        return float(loss.detach())
    return step


def features_info(x) -> dict:
    """The input features' layout and size: ``{"layout", "rows", "columns", "nonzeros"}``."""
    import torch

    if x.layout == torch.sparse_csr:
        nnz = int(x.values().numel())
    elif x.is_sparse:
        nnz = int(x._nnz())
    else:
        nnz = int(torch.count_nonzero(x))
    return {"layout": "sparse" if x.layout != torch.strided else "dense",
            "rows": int(x.size(0)), "columns": int(x.size(1)), "nonzeros": nnz}
