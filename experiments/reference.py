"""The plain PyG reference every performance ratio divides by: a single-process full-graph
torch_geometric GCN (dropout before every layer, ReLU between layers, ``GCNConv(cached=True)``),
trained with Adam, on ``edge_index`` or on a sparse CSR adjacency. ``experiments.bench`` times it
against our trainer; ``benchmarks/test_bench_epoch.py`` times it alone.

Shapes: ``graph.x [N, F]`` (made dense), ``graph.edge_index [2, E]``; logits ``[N, C]``."""
from __future__ import annotations


def plain_gcn(in_dim: int, hidden: int, out_dim: int, layers: int = 3, dropout: float = 0.5):
    """A plain full-graph torch_geometric GCN (the reference every ratio divides by): dropout
    before every layer, ReLU between layers, ``GCNConv(cached=True)`` on ``edge_index``."""
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
                x = conv(F.dropout(x, dropout, self.training), edge_index)
                if i < len(self.convs) - 1:
                    x = F.relu(x)
            return x

    return PlainGCN()


def plain_step_fn(graph, hidden=256, layers=3, dropout=0.5, lr=0.01, seed=0,
                  adjacency="edge_index"):
    """``step()`` = one full-graph training step of ``plain_gcn`` on ``graph`` (dense x).
    ``adjacency``: "edge_index" (PyG's gather/scatter message passing, examples/gcn.py) or
    "sparse" (a torch sparse CSR adjacency, PyG's ``ToSparseTensor`` route: one SpMM per layer)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    x = graph.x.to_dense() if graph.x.is_sparse else graph.x
    model = plain_gcn(x.size(1), hidden, graph.num_classes, layers, dropout)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    ei, y, mask = graph.edge_index, graph.y, graph.train_mask
    if adjacency == "sparse":  # adj_t (row = target); the graph is symmetric
        from torch_geometric.utils import to_torch_csr_tensor
        ei = to_torch_csr_tensor(ei.flip(0), size=(graph.num_nodes, graph.num_nodes))

    def step(epoch: int = 0) -> float:
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei)[mask], y[mask])
        loss.backward()
        opt.step()
        return float(loss.detach())
    return step
