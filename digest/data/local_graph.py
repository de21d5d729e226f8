"""What one worker holds: its partition's local graph (docs/methods.md section 1).

Local node order is ``[inner (V_m, ascending id) | halo (H_m, by owner then id)]``. Local edges are
every (u -> v) with v in V_m; their endpoints are local indices. ``deg`` is the GLOBAL degree of
every local node, so GCN normalisation on the local graph equals the full graph's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .graph import Graph, degree
from .partition import PartitionBook


@dataclass
class LocalPart:
    """Args/Shapes (n = n_inner + n_halo local rows, E_m local edges):
        rank, num_parts: this part and M.
        global_ids: ``[n]`` global id of every local row.
        n_inner, n_halo: row counts.
        edge_index: ``[2, E_m]`` local (src, dst), dst < n_inner. None in a worker once its
            trainer has built its views (``run.worker`` releases it; the views hold the edges).
        deg: ``[n]`` global degree (without self-loop) of every local row.
        x: ``[n, F]`` input features of inner and halo rows (dense or sparse COO).
        y, train_mask, val_mask, test_mask: ``[n_inner]``.
        send_idx: per peer p, positions in the inner rows sent to p.
        recv_counts: per peer p, halo rows received from p (halo is ordered by peer).
        num_train_global, num_val_global, num_test_global: global mask sizes (loss weighting).
    """

    rank: int
    num_parts: int
    global_ids: Tensor
    n_inner: int
    n_halo: int
    edge_index: Tensor | None
    deg: Tensor
    x: Tensor
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor
    send_idx: list[Tensor]
    recv_counts: list[int]
    num_classes: int
    num_train_global: int
    num_val_global: int
    num_test_global: int
    meta: dict = field(default_factory=dict)

    def halo_input_bytes(self) -> int:
        """Bytes of the halo rows' input features as the part file holds them (dense rows, or
        a sparse block's stored values and indices): what fetching X[H_m] once moves."""
        if not self.n_halo:
            return 0
        x = self.x
        if x.is_sparse:  # COO: values + one int64 (row, col) pair per stored entry
            x = x.coalesce()
            halo = x.indices()[0] >= self.n_inner
            return int(halo.sum()) * (x.values().element_size() + 2 * x.indices().element_size())
        return self.n_halo * x.size(1) * x.element_size()


def _rows(x: Tensor, ids: Tensor) -> Tensor:
    return x.index_select(0, ids).coalesce() if x.is_sparse else x[ids]


def extract_part(graph: Graph, book: PartitionBook, m: int, deg: Tensor | None = None) -> LocalPart:
    """Cut part m out of the full graph. Vectorised; O(N + E) memory for one part at a time."""
    inner, halo = book.inner[m], book.halo[m]
    ids = torch.cat([inner, halo])
    src, dst = graph.edge_index
    keep = book.part_of[dst] == m
    g2l = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    g2l[ids] = torch.arange(ids.numel())
    local_edges = torch.stack([g2l[src[keep]], g2l[dst[keep]]])
    assert bool((local_edges >= 0).all()), "halo does not cover every in-neighbour"
    deg = degree(graph.edge_index, graph.num_nodes) if deg is None else deg
    return LocalPart(
        rank=m, num_parts=book.num_parts, global_ids=ids,
        n_inner=int(inner.numel()), n_halo=int(halo.numel()),
        edge_index=local_edges, deg=deg[ids], x=_rows(graph.x, ids), y=graph.y[inner],
        train_mask=graph.train_mask[inner], val_mask=graph.val_mask[inner],
        test_mask=graph.test_mask[inner],
        send_idx=list(book.send[m]), recv_counts=book.recv_counts(m),
        num_classes=graph.num_classes,
        num_train_global=int(graph.train_mask.sum()), num_val_global=int(graph.val_mask.sum()),
        num_test_global=int(graph.test_mask.sum()),
        meta={"dataset": graph.name, **graph.meta},
    )
