"""The job advise reasons about: one partitioned graph, read from the partition cache, reduced to
the counts the byte and time models need (docs/methods.md section 13).

Nothing here trains or keeps a tensor of the graph: each worker's part file is read once and
turned into a few integers (rows, edges, stored feature values, rows sent to each peer), plus the
statistics advise compares graphs by (edge cut, halo fraction, homophily, feature width).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data.cache import load_book, load_manifest, load_part, prepare_partition


@dataclass(frozen=True)
class PartCounts:
    """One worker's local graph, counted.

    Args:
        n_inner, n_halo: rows it owns / reads from others.
        e_inner, e_halo: local-graph edges from inner / halo rows (self-loops not included).
        x_inner, x_halo: stored input-feature values of inner / halo rows (rows x F when dense).
        train: its training rows.
    """

    n_inner: int
    n_halo: int
    e_inner: int
    e_halo: int
    x_inner: int
    x_halo: int
    train: int


@dataclass(frozen=True)
class Job:
    """A dataset partitioned for M workers.

    Args:
        dataset: the spec. parts: per worker counts. send: ``send[r][p]`` rows r sends to p in one
        halo exchange. fetch: per worker, (bytes, messages) of its halo's input features.
        features, classes, nodes, edges: the graph's. sparse_x: features stored sparse.
        stats: edge_cut (fraction of edges cut), halo (halo rows / nodes), homophily (fraction
        of edges joining equal labels), features.
    """

    dataset: str
    parts: tuple
    send: tuple
    fetch: tuple
    features: int
    classes: int
    nodes: int
    edges: int
    sparse_x: bool
    stats: dict

    @property
    def workers(self) -> int:
        return len(self.parts)


def count_part(part) -> PartCounts:
    """The counts of one ``LocalPart``."""
    src = part.edge_index[0]
    from_halo = int((src >= part.n_inner).sum())
    x = part.x
    if x.is_sparse:
        rows = x.coalesce().indices()[0]
        x_halo = int((rows >= part.n_inner).sum())
        x_inner = int(rows.numel()) - x_halo
    else:
        x_inner, x_halo = part.n_inner * x.size(1), part.n_halo * x.size(1)
    return PartCounts(part.n_inner, part.n_halo, int(src.numel()) - from_halo, from_halo,
                      x_inner, x_halo, int(part.train_mask.sum()))


def load_job(dataset: str, workers: int, root=None, partitioner: str = "metis",
             seed: int = 0, sparse: str = "auto", graph=None) -> Job:
    """Partition ``dataset`` for ``workers`` (the cache is reused, as ``train`` reuses it) and
    count it. ``graph``: a hand-made ``Graph`` named ``dataset`` (tests)."""
    directory = prepare_partition(dataset, workers, partitioner, seed, root, sparse, graph=graph)
    manifest = load_manifest(directory)
    book = load_book(directory)
    M = book.num_parts
    send = tuple(tuple(int(book.send[r][p].numel()) for p in range(M)) for r in range(M))
    parts, fetch, ends = [], [], []
    labels = torch.full((book.part_of.numel(),), -1, dtype=torch.long)
    for m in range(M):
        part = load_part(directory, m)
        parts.append(count_part(part))
        fetch.append((part.halo_input_bytes(), sum(1 for c in part.recv_counts if c)))
        labels[book.inner[m]] = part.y
        ends.append(part.global_ids[part.edge_index])  # [2, E_m] global (src, dst)
        del part
    same = sum(int((labels[e[0]] == labels[e[1]]).sum()) for e in ends)
    labelled = sum(int(e.size(1)) for e in ends)
    g, st = manifest["graph"], manifest["stats"]
    stats = {"edge_cut": float(st["edge_cut_fraction"]),
             "halo": float(st["halo_total"]) / max(1, st["nodes"]),
             "homophily": same / max(1, labelled), "features": int(g["features"])}
    return Job(dataset, tuple(parts), send, tuple(fetch), int(g["features"]), int(g["classes"]),
               int(g["nodes"]), int(g["edges"]), bool(g.get("sparse_x")), stats)
