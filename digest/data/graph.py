"""The in-memory graph every loader returns (docs/methods.md section 1)."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class Graph:
    """A node-classification graph, undirected, deduplicated, without self-loops.

    Args:
        name: dataset spec it came from, e.g. ``"Cora"`` or ``"synthetic:nodes=2000"``.
        x: node features. Shape ``[N, F]``, float32, dense or sparse COO (low density).
        y: labels. Shape ``[N]``, int64 in ``[0, num_classes)``.
        edge_index: directed edge list holding both directions. Shape ``[2, E]``, int64.
        train_mask, val_mask, test_mask: Shape ``[N]``, bool.
        num_classes: number of label classes.
        meta: provenance (source, split protocol, generator options), written into results.
    """

    name: str
    x: Tensor
    y: Tensor
    edge_index: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor
    num_classes: int
    meta: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return int(self.y.numel())

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.size(1))

    @property
    def num_features(self) -> int:
        return int(self.x.size(1))


def canonical_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Symmetrise, drop self-loops and duplicates; sorted by (dst, src).

    Vectorised (one sort over int64 keys), so it is fine for tens of millions of edges.

    Shapes: ``[2, E] -> [2, E']``.
    """
    src, dst = edge_index[0].long(), edge_index[1].long()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    src, dst = torch.cat([src, dst]), torch.cat([dst, src])
    key = torch.unique(dst * num_nodes + src)  # sorted, deduplicated
    return torch.stack([key % num_nodes, key // num_nodes])


def degree(edge_index: Tensor, num_nodes: int) -> Tensor:
    """In-degree of every node (== out-degree on a symmetric graph). Shape ``[N]``, int64."""
    return torch.bincount(edge_index[1], minlength=num_nodes)
