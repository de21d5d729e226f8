"""Partition book on a hand-made graph (exact answers) and the partitioners on a synthetic one."""
import pytest
import torch

from digest.data.graph import Graph, canonical_edges
from digest.data.local_graph import extract_part
from digest.data.partition import PartitionError, assign_parts, build_book, partition, partition_stats
from digest.data.synthetic import make_synthetic
from helpers import CUT, PART_OF, toy_graph



def L(t):
    return t.tolist()


@pytest.fixture
def book():
    g = toy_graph()
    return build_book(PART_OF, g.edge_index, 3)


def test_inner_halo_send_exact(book):
    assert [L(t) for t in book.inner] == [[0, 2, 5], [1, 4, 7], [3, 6, 8]]
    # halo ordered by (owner, id)
    assert [L(t) for t in book.halo] == [[1, 4, 3], [0, 5, 8], [2, 5, 7]]
    # send[p][m]: positions in inner[p]
    assert [[L(t) for t in row] for row in book.send] == [
        [[], [0, 2], [1, 2]],
        [[0, 1], [], [2]],
        [[0], [2], []],
    ]
    assert book.recv_counts(0) == [0, 2, 1] and book.send_counts(0) == [0, 2, 2]
    assert [L(book.boundary(m)) for m in range(3)] == [[0, 1, 2], [0, 1, 2], [0, 2]]


def test_halo_is_one_hop_in_neighbours_outside(book):
    g = toy_graph()
    src, dst = g.edge_index
    for m in range(3):
        into = PART_OF[dst] == m
        expect = set(src[into & (PART_OF[src] != m)].tolist())
        assert set(L(book.halo[m])) == expect
        assert len(L(book.halo[m])) == len(expect)  # no duplicates
        owners = PART_OF[book.halo[m]]
        key = owners * 9 + book.halo[m]
        assert L(key) == sorted(L(key))  # sorted by (owner, id)


def test_send_recv_mutual(book):
    for m in range(3):
        for p in range(3):
            from_p = book.halo[m][PART_OF[book.halo[m]] == p]
            assert torch.equal(from_p, book.inner[p][book.send[p][m]])
        # concatenating what every owner sends to m is the halo, in order
        assert torch.equal(torch.cat([book.inner[p][book.send[p][m]] for p in range(3)]), book.halo[m])


def test_every_edge_local_exactly_once(book):
    g = toy_graph()
    seen = []
    for m in range(3):
        part = extract_part(g, book, m)
        gs, gd = part.global_ids[part.edge_index[0]], part.global_ids[part.edge_index[1]]
        assert bool((PART_OF[gd] == m).all())
        # exactly the edges of G whose dst is in V_m
        mask = PART_OF[g.edge_index[1]] == m
        assert torch.equal(torch.stack([gs, gd]), g.edge_index[:, mask])
        seen += list(zip(gs.tolist(), gd.tolist()))
    assert len(seen) == len(set(seen)) == g.num_edges == 24
    assert set(seen) == set(zip(*g.edge_index.tolist()))


def test_stats_exact(book):
    g = toy_graph()
    s = partition_stats(book, g.edge_index)
    assert s["edge_cut"] == len(CUT) == 5
    assert s["edge_cut_fraction"] == pytest.approx(10 / 24)
    assert s["halo_sizes"] == [3, 3, 3] and s["halo_total"] == 9
    assert s["boundary_sizes"] == [3, 3, 2]
    assert s["inner_sizes"] == [3, 3, 3] and s["node_balance"] == 1.0
    # local edges (in-degree sums of inner nodes): 8, 9, 7 -> max / mean = 9 / 8
    assert s["edge_balance"] == pytest.approx(9 / 8)
    assert (s["parts"], s["nodes"], s["edges"]) == (3, 9, 24)


def test_empty_part_and_isolated_nodes():
    g = toy_graph(n=11)  # nodes 9, 10 isolated
    part_of = torch.cat([PART_OF, torch.tensor([0, 1])])
    b = build_book(part_of, g.edge_index, 4)  # part 3 empty
    assert [L(t) for t in b.inner] == [[0, 2, 5, 9], [1, 4, 7, 10], [3, 6, 8], []]
    assert L(b.halo[3]) == [] and all(L(b.send[p][3]) == [] for p in range(4))
    assert [L(t) for t in b.halo[:3]] == [[1, 4, 3], [0, 5, 8], [2, 5, 7]]


def random_graph(n=2000, seed=0):
    """A ring lattice (locality METIS can find) plus random chords."""
    gen = torch.Generator().manual_seed(seed)
    ring = torch.arange(n)
    pairs = [torch.stack([ring, (ring + k) % n]) for k in (1, 2, 3)]
    pairs.append(torch.randint(0, n, (2, 2 * n), generator=gen))
    ei = canonical_edges(torch.cat(pairs, 1), n)
    return Graph(name="rand", x=torch.zeros(n, 1), y=torch.zeros(n, dtype=torch.long), edge_index=ei,
                 train_mask=torch.ones(n, dtype=torch.bool), val_mask=torch.zeros(n, dtype=torch.bool),
                 test_mask=torch.zeros(n, dtype=torch.bool), num_classes=1)


@pytest.mark.parametrize("method", ["metis", "metis-edges", "random"])
def test_partitioners_balanced(method):
    g = random_graph()
    book = partition(g, 4, method, seed=0)
    assert book.part_of.shape == (2000,) and book.part_of.dtype == torch.long
    assert int(book.part_of.min()) == 0 and int(book.part_of.max()) == 3
    assert sum(t.numel() for t in book.inner) == 2000
    assert book.stats["node_balance"] < 1.1  # near-uniform degrees: edges balanced = nodes too
    assert book.stats["method"] == method and isinstance(book.stats["seconds"], float)
    if method == "random":
        assert book.stats["inner_sizes"] == [500, 500, 500, 500]
    # same seed, same assignment
    assert torch.equal(assign_parts(g, 4, method, seed=0), book.part_of)


def test_metis_beats_random_cut():
    g = random_graph()
    assert partition(g, 4, "metis").stats["edge_cut"] < partition(g, 4, "random").stats["edge_cut"]


def test_metis_edges_balances_the_edges_of_a_skewed_graph():
    """Degree-corrected SBM (power-law degrees): plain METIS balances node counts, so the part
    holding the hubs holds more edges; vertex weights in-degree + 1 balance edges instead."""
    g = make_synthetic(nodes=3000, avg_degree=20, degree_exp=2.1, seed=1)
    nodes, edges = partition(g, 4, "metis").stats, partition(g, 4, "metis-edges").stats
    assert nodes["node_balance"] < 1.05 < nodes["edge_balance"]
    assert edges["edge_balance"] < 1.05 and edges["edge_balance"] < nodes["edge_balance"]


def test_metis_unsorted_edge_list_same_answer():
    g = random_graph(500)
    perm = torch.randperm(g.num_edges, generator=torch.Generator().manual_seed(1))
    shuffled = Graph(**{**g.__dict__, "edge_index": g.edge_index[:, perm]})
    assert torch.equal(assign_parts(shuffled, 4, "metis"), assign_parts(g, 4, "metis"))


@pytest.mark.parametrize("method", ["metis", "metis-edges", "random"])
def test_one_part_trivial(method):
    g = toy_graph()
    book = partition(g, 1, method)
    assert L(book.part_of) == [0] * 9
    assert L(book.inner[0]) == list(range(9)) and L(book.halo[0]) == []
    assert L(book.send[0][0]) == []
    assert book.stats["edge_cut"] == 0 and book.stats["halo_sizes"] == [0]


@pytest.mark.parametrize("parts,method", [(0, "metis"), (-1, "random"), (10, "metis"), (10, "random"),
                                          (2, "spectral")])
def test_bad_requests(parts, method):
    with pytest.raises(PartitionError):
        partition(toy_graph(), parts, method)
