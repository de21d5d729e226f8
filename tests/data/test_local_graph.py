"""extract_part on a hand-made graph: exact local order, edges, degrees and sliced tensors."""
import torch

from digest.data.graph import degree
from digest.data.local_graph import extract_part
from digest.data.partition import build_book
from helpers import PART_OF, toy_graph



def test_part0_exact():
    g = toy_graph()
    p = extract_part(g, build_book(PART_OF, g.edge_index, 3), 0)
    assert p.global_ids.tolist() == [0, 2, 5, 1, 4, 3]  # [inner | halo by (owner, id)]
    assert (p.rank, p.num_parts, p.n_inner, p.n_halo) == (0, 3, 3, 3)
    # edges with dst in {0, 2, 5}, sorted by (dst, src), in local ids
    assert p.edge_index.tolist() == [[3, 1, 0, 5, 2, 1, 5, 4], [0, 0, 1, 1, 1, 2, 2, 2]]
    assert p.deg.tolist() == [2, 3, 3, 3, 3, 3]
    assert [s.tolist() for s in p.send_idx] == [[], [0, 2], [1, 2]]
    assert p.recv_counts == [0, 2, 1]
    assert p.y.tolist() == [2, 0, 0]
    assert p.train_mask.tolist() == [True, False, True]
    assert p.val_mask.tolist() == [False, True, False]
    assert p.test_mask.tolist() == [False, False, False]
    assert (p.num_train_global, p.num_val_global, p.num_test_global) == (5, 2, 2)
    assert p.num_classes == 3 and p.meta == {"dataset": "toy", "source": "hand", "opts": {"a": 1}}
    assert torch.equal(p.x, g.x[[0, 2, 5, 1, 4, 3]])


def test_part2_exact():
    g = toy_graph()
    p = extract_part(g, build_book(PART_OF, g.edge_index, 3), 2)
    assert p.global_ids.tolist() == [3, 6, 8, 2, 5, 7]
    assert p.edge_index.tolist() == [[3, 4, 1, 0, 2, 1, 5], [0, 0, 0, 1, 1, 2, 2]]
    assert p.deg.tolist() == [3, 2, 2, 3, 3, 3]
    assert [s.tolist() for s in p.send_idx] == [[0], [2], []]
    assert p.recv_counts == [2, 1, 0]
    assert p.y.tolist() == [2, 2, 0]


def test_deg_is_global_degree_and_dst_inner():
    g = toy_graph()
    book = build_book(PART_OF, g.edge_index, 3)
    deg = degree(g.edge_index, 9)
    for m in range(3):
        p = extract_part(g, book, m)
        assert torch.equal(p.deg, deg[p.global_ids])
        assert torch.equal(extract_part(g, book, m, deg=deg).edge_index, p.edge_index)
        assert bool((p.edge_index[1] < p.n_inner).all())
        # local in-degree of an inner node == its global degree (every in-edge is local)
        local_in = torch.bincount(p.edge_index[1], minlength=p.n_inner + p.n_halo)[: p.n_inner]
        assert torch.equal(local_in, p.deg[: p.n_inner])


def test_sparse_x_stays_sparse():
    gd, gs = toy_graph(), toy_graph(sparse=True)
    book = build_book(PART_OF, gd.edge_index, 3)
    for m in range(3):
        pd, ps = extract_part(gd, book, m), extract_part(gs, book, m)
        assert ps.x.is_sparse and ps.x.is_coalesced() and not pd.x.is_sparse
        assert ps.x.shape == (6, 5)
        assert torch.equal(ps.x.to_dense(), pd.x)
        assert torch.equal(pd.x, gd.x[pd.global_ids])
