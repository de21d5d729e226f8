"""Partitioning time: METIS (pymetis) plus the partition book, on a synthetic graph."""
from __future__ import annotations

import pytest

GRAPH = dict(nodes=50000, avg_degree=15, classes=8, features=16, seed=0)


@pytest.fixture(scope="module")
def graph():
    from digest.data.synthetic import make_synthetic
    return make_synthetic(**GRAPH)


@pytest.mark.parametrize("parts", [4, 8])
def test_partition_metis(benchmark, graph, parts):
    from digest.data.partition import partition
    book = benchmark.pedantic(partition, args=(graph, parts, "metis", 0), rounds=3, iterations=1)
    benchmark.extra_info.update(graph=GRAPH, parts=parts, edge_cut=book.stats["edge_cut"],
                                edge_cut_fraction=book.stats["edge_cut_fraction"],
                                nodes=graph.num_nodes, edges=graph.num_edges)
