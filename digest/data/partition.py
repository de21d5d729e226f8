"""Partitioning and the partition book (docs/methods.md section 1).

The book says, for every part m: its inner nodes V_m, its halo H_m (1-hop in-neighbours owned by
other parts) and, for every pair (p, m), which inner rows of p are sent to m by a halo exchange.
Halo rows are ordered by (owner rank, global id) and each owner's send list is ordered by global
id too, so the concatenated all-to-all receive buffer IS the halo, in order, with no reshuffling.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..config import PARTITIONERS
from .graph import Graph


class PartitionError(ValueError):
    """Bad partition request (parts < 1 or > nodes, unknown partitioner)."""


@dataclass
class PartitionBook:
    """Who owns which node and who sends what to whom.

    Args:
        num_parts: M.
        part_of: owner of every node. Shape ``[N]``, int64.
        inner: ``inner[m]`` global ids of V_m, ascending. Shape ``[|V_m|]``.
        halo: ``halo[m]`` global ids of H_m ordered by (owner, id). Shape ``[|H_m|]``.
        send: ``send[p][m]`` positions in ``inner[p]`` of the rows p sends to m (empty for p == m).
        stats: edge cut, halo sizes, balance; see :func:`partition_stats`.
    """

    num_parts: int
    part_of: Tensor
    inner: list[Tensor]
    halo: list[Tensor]
    send: list[list[Tensor]]
    stats: dict = field(default_factory=dict)

    def recv_counts(self, m: int) -> list[int]:
        """Rows part m receives from each part p (== len(send[p][m]))."""
        return [int(self.send[p][m].numel()) for p in range(self.num_parts)]

    def send_counts(self, m: int) -> list[int]:
        return [int(self.send[m][p].numel()) for p in range(self.num_parts)]

    def boundary(self, m: int) -> Tensor:
        """Positions in ``inner[m]`` of the boundary nodes of m (appear in some other halo)."""
        parts = [s for s in self.send[m] if s.numel()]
        return torch.unique(torch.cat(parts)) if parts else torch.empty(0, dtype=torch.long)


def assign_parts(graph: Graph, num_parts: int, method: str = "metis", seed: int = 0) -> Tensor:
    """Owner of every node. Shape ``[N]``, int64.

    METIS (pymetis) minimises the edge cut of the symmetric graph without self-loops (``Graph``
    already has that form) while balancing node counts (``metis``) or node weights in-degree + 1
    (``metis-edges``: every part then holds about the same number of local-graph edges, self-loops
    included, so the workers' aggregations cost about the same); ``random`` is the ablation.
    """
    n = graph.num_nodes
    if method not in PARTITIONERS:
        raise PartitionError(f"unknown partitioner {method!r}; choose from {', '.join(PARTITIONERS)}")
    if not 1 <= num_parts <= n:
        raise PartitionError(f"--parts must be between 1 and the number of nodes ({n}), got {num_parts}")
    if num_parts == 1:
        return torch.zeros(n, dtype=torch.long)
    if method == "random":
        gen = torch.Generator().manual_seed(seed)
        # a balanced random assignment: a permutation cut into M nearly equal slices
        perm = torch.randperm(n, generator=gen)
        part_of = torch.empty(n, dtype=torch.long)
        part_of[perm] = torch.arange(n) * num_parts // n
        return part_of
    try:
        import pymetis
    except ImportError as e:  # pragma: no cover - pinned in requirements.txt
        raise ImportError("METIS partitioning needs 'pymetis' (pip install pymetis)") from e
    # CSR of the graph sorted by source; canonical_edges sorts by (dst, src) and the graph is
    # symmetric, so reading (dst, src) as (src, dst) gives a CSR sorted by source for free.
    # A hand-built edge list may not be sorted: METIS would then get a corrupt CSR, so sort it.
    dst_t, src_t = graph.edge_index[1].long(), graph.edge_index[0].long()
    if dst_t.numel() > 1 and not bool((dst_t[1:] >= dst_t[:-1]).all()):
        order = torch.argsort(dst_t * n + src_t)  # the (dst, src) order canonical_edges gives
        dst_t, src_t = dst_t[order], src_t[order]
    dst, src = dst_t.numpy(), src_t.numpy()
    deg = np.bincount(dst, minlength=n)
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=xadj[1:])
    opts = pymetis.Options(seed=seed)
    weights = (deg + 1).tolist() if method == "metis-edges" else None
    if hasattr(pymetis, "CSRAdjacency"):  # xadj=/adjncy= keywords are deprecated since 2025.2
        adjacency = pymetis.CSRAdjacency(xadj, src.astype(np.int64, copy=False))
        _, membership = pymetis.part_graph(num_parts, adjacency, vweights=weights, options=opts)
    else:  # pragma: no cover - older pymetis
        _, membership = pymetis.part_graph(num_parts, xadj=xadj, adjncy=src.astype(np.int64),
                                           vweights=weights, options=opts)
    return torch.as_tensor(np.asarray(membership), dtype=torch.long)


def build_book(part_of: Tensor, edge_index: Tensor, num_parts: int) -> PartitionBook:
    """Inner sets, halos and send lists from an assignment. Vectorised: a few sorts, no loops
    over nodes or edges (the loop over part pairs is M^2 slices)."""
    n, M = part_of.numel(), num_parts
    src, dst = edge_index
    order = torch.argsort(part_of, stable=True)  # nodes grouped by part, ids ascending
    counts = torch.bincount(part_of, minlength=M)
    inner = list(torch.split(order, counts.tolist()))
    pos = torch.empty(n, dtype=torch.long)  # position of every node inside its part
    pos[order] = torch.arange(n) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)

    cut = part_of[src] != part_of[dst]
    m, u = part_of[dst[cut]], src[cut]  # u (owned by p) is in the halo of m
    p = part_of[u]
    key = torch.unique((m * M + p) * n + u)  # sorted by (m, p, u), deduplicated
    m, p, u = key // (M * n), (key // n) % M, key % n
    pair_counts = torch.bincount(m * M + p, minlength=M * M).view(M, M)  # [m, p]
    halo = list(torch.split(u, pair_counts.sum(1).tolist()))
    pieces = list(torch.split(pos[u], pair_counts.flatten().tolist()))
    send = [[pieces[mm * M + pp] for mm in range(M)] for pp in range(M)]
    return PartitionBook(M, part_of, inner, halo, send)


def partition_stats(book: PartitionBook, edge_index: Tensor) -> dict:
    """Edge cut, halo size per part, node and edge balance (max / mean)."""
    src, dst = edge_index
    part_of = book.part_of
    nodes = torch.tensor([t.numel() for t in book.inner], dtype=torch.float64)
    edges = torch.bincount(part_of[dst], minlength=book.num_parts).double()  # local-graph edges
    halo = [int(h.numel()) for h in book.halo]
    boundary = [int(book.boundary(m).numel()) for m in range(book.num_parts)]
    cut = int((part_of[src] != part_of[dst]).sum())
    return {
        "parts": book.num_parts,
        "nodes": int(part_of.numel()),
        "edges": int(edge_index.size(1)),
        "edge_cut": cut // 2,  # undirected edges cut
        "edge_cut_fraction": cut / max(1, edge_index.size(1)),
        "inner_sizes": [int(v) for v in nodes.tolist()],
        "halo_sizes": halo,
        "boundary_sizes": boundary,
        "halo_total": sum(halo),
        "node_balance": float(nodes.max() / nodes.mean()),
        "edge_balance": float(edges.max() / edges.mean()),
    }


def partition(graph: Graph, num_parts: int, method: str = "metis", seed: int = 0) -> PartitionBook:
    """Assign, build the book and attach its statistics (with the time partitioning took)."""
    t0 = time.perf_counter()
    part_of = assign_parts(graph, num_parts, method, seed)
    book = build_book(part_of, graph.edge_index, num_parts)
    book.stats = partition_stats(book, graph.edge_index)
    book.stats.update(method=method, seed=seed, seconds=round(time.perf_counter() - t0, 3))
    return book
