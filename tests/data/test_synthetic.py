"""The DC-SBM generator: determinism, sizes, graph invariants, homophily and class signal."""
from __future__ import annotations

import pytest
import torch

from digest.data.graph import canonical_edges, degree
from digest.data.synthetic import drawn_options, make_synthetic, popularity_split, random_split


@pytest.fixture(scope='module')
def g5000():
    return make_synthetic(nodes=5000, classes=6, avg_degree=12, features=32, homophily=0.7,
                          seed=1)


def _same(a, b):
    return all(torch.equal(getattr(a, k), getattr(b, k)) for k in
               ('x', 'y', 'edge_index', 'train_mask', 'val_mask', 'test_mask'))


def test_deterministic_from_seed():
    a, b = make_synthetic(nodes=800, seed=5), make_synthetic(nodes=800, seed=5)
    assert _same(a, b)
    c = make_synthetic(nodes=800, seed=6)
    assert not torch.equal(a.x, c.x) and not torch.equal(a.y, c.y)
    assert a.edge_index.shape != c.edge_index.shape or not torch.equal(a.edge_index, c.edge_index)


def test_sizes_and_dtypes(g5000):
    g = g5000
    assert (g.num_nodes, g.num_features, g.num_classes) == (5000, 32, 6)
    assert g.x.dtype == torch.float32 and g.y.dtype == torch.int64
    assert g.edge_index.dtype == torch.int64 and g.edge_index.shape[0] == 2
    assert abs(g.num_edges / g.num_nodes - 12) <= 0.15 * 12
    assert int(g.y.min()) >= 0 and int(g.y.max()) < 6
    assert set(g.y.tolist()) == set(range(6))


def test_graph_invariants(g5000):
    src, dst = g5000.edge_index
    assert not bool((src == dst).any()), 'self-loops'
    # canonical_edges is idempotent on a symmetric, deduplicated, sorted edge list
    assert torch.equal(canonical_edges(g5000.edge_index, g5000.num_nodes), g5000.edge_index)
    fwd = set(zip(src.tolist(), dst.tolist()))
    assert len(fwd) == g5000.num_edges, 'duplicates'
    assert all((d, s) in fwd for s, d in list(fwd)[:5000]), 'not symmetric'
    deg = degree(g5000.edge_index, g5000.num_nodes).float()
    assert deg.max() > 4 * deg.mean(), 'degrees should be heavy-tailed (degree-corrected SBM)'


def test_homophily_close_to_requested(g5000):
    src, dst = g5000.edge_index
    h = (g5000.y[src] == g5000.y[dst]).float().mean().item()
    assert abs(h - 0.7) <= 0.05
    assert g5000.meta['homophily_measured'] == pytest.approx(h)
    low = make_synthetic(nodes=2000, classes=4, homophily=0.1, seed=2)
    s, d = low.edge_index
    assert abs((low.y[s] == low.y[d]).float().mean().item() - 0.1) <= 0.05


def test_features_depend_on_class(g5000):
    x, y = g5000.x, g5000.y
    means = torch.stack([x[y == c].mean(0) for c in range(g5000.num_classes)])
    between = torch.cdist(means, means)[~torch.eye(len(means), dtype=torch.bool)]
    # class means differ far more than the sampling error of a mean (noise 1/sqrt(~800))
    assert between.min() > 5 / (5000 / 6) ** 0.5
    # nearest-class-mean on raw features beats chance clearly but is far from perfect
    acc = (torch.cdist(x, means).argmin(1) == y).float().mean().item()
    assert 1.5 / 6 < acc < 0.95


def test_split_and_meta(g5000):
    g = g5000
    masks = torch.stack([g.train_mask, g.val_mask, g.test_mask]).long()
    assert torch.equal(masks.sum(0), torch.ones(5000, dtype=torch.long)), 'disjoint and covering'
    assert g.train_mask.sum() == 3000 and g.val_mask.sum() == 1000
    assert g.meta['split'].startswith('random 60%/20%/20%')
    small = make_synthetic(nodes=500, classes=3, train=0.08, val=0.016, seed=0).meta['split']
    assert small.startswith('random 8%/1.6%/90.4% ')  # the fractions as given, not rounded
    assert g.meta['options']['homophily'] == 0.7 and g.meta['options']['seed'] == 1
    t1, _, _ = random_split(100, seed=3)
    assert torch.equal(t1, random_split(100, seed=3)[0])
    assert not torch.equal(t1, random_split(100, seed=4)[0])


def test_popularity_split_orders_by_degree():
    """OGB's split for ogbn-products by sales rank, the degree standing for popularity: the most
    connected train, the next validate, the least connected are test; ties to the lower id."""
    node_degree = torch.tensor([3, 9, 1, 9, 5, 0, 2, 7, 4, 6])
    train, val, test = popularity_split(node_degree, train=0.2, val=0.3)
    assert train.nonzero().flatten().tolist() == [1, 3]
    assert val.nonzero().flatten().tolist() == [4, 7, 9]
    assert test.nonzero().flatten().tolist() == [0, 2, 5, 6, 8]
    g = make_synthetic(nodes=600, avg_degree=8, seed=2, train=0.1, val=0.1, split='popularity')
    deg = degree(g.edge_index, 600)
    assert int(g.train_mask.sum()) == 60 and int(g.val_mask.sum()) == 60
    assert deg[g.train_mask].min() >= deg[g.val_mask].max() >= deg[g.val_mask].min() \
        >= deg[g.test_mask].max()
    assert g.meta['split'].startswith('popularity 10%/10%/80%')
    assert g.meta['options']['split'] == 'popularity'
    # the same graph as the random split's: only the masks differ
    r = make_synthetic(nodes=600, avg_degree=8, seed=2, train=0.1, val=0.1)
    assert torch.equal(g.edge_index, r.edge_index) and torch.equal(g.x, r.x)
    assert 'split' not in r.meta['options']
    with pytest.raises(ValueError, match="split must be 'random' or 'popularity'"):
        make_synthetic(nodes=50, split='degree')


def test_drawn_options_fill_in_what_the_generator_leaves_out_at_its_defaults():
    plain = make_synthetic(nodes=60, classes=3, seed=1).meta['options']
    assert 'communities' not in plain and 'split' not in plain and 'aligned' not in plain
    assert drawn_options(plain) == {**plain, 'communities': 1, 'split': 'random'}
    local = make_synthetic(nodes=60, classes=3, seed=1, communities=4,
                           split='popularity').meta['options']
    assert 'aligned' not in local and local['split'] == 'popularity'
    assert drawn_options(local) == {**local, 'aligned': 0.0}
    aligned = make_synthetic(nodes=60, classes=3, seed=1, communities=4, aligned=0.5)
    assert drawn_options(aligned.meta['options'])['aligned'] == 0.5


def test_tiny_and_single_class():
    g = make_synthetic(nodes=2, classes=1, avg_degree=1, features=3, seed=0)
    assert g.num_nodes == 2 and g.num_edges <= 2
    g = make_synthetic(nodes=300, classes=1, avg_degree=4, features=3, homophily=0.2, seed=0)
    assert g.num_edges > 0 and int(g.y.max()) == 0


def test_default_graph_is_unchanged_by_the_community_option():
    """Committed results were made before ``communities`` existed: the default (K = 1) must keep
    drawing the same graph. The digest is of the graph generated at git commit 301e7fc."""
    import hashlib
    g = make_synthetic(nodes=900, classes=5, avg_degree=8, features=6, seed=3)
    h = hashlib.sha256()
    for t in (g.x, g.y, g.edge_index):
        h.update(t.numpy().tobytes())
    assert h.hexdigest() == 'ddc1c3f29b94e34f59da20fa2388d405b66fd414e34787ea85a9f529f4c332aa'
    assert _same(g, make_synthetic(nodes=900, classes=5, avg_degree=8, features=6, seed=3,
                                   communities=1, locality=0.3))
    assert 'communities' not in g.meta['options'] and 'locality_measured' not in g.meta


def test_communities_keep_edges_local_and_partitions_small():
    from digest.data.partition import partition, partition_stats
    kw = dict(nodes=20000, classes=4, avg_degree=16, features=4, homophily=0.8, seed=0)
    flat = make_synthetic(**kw)
    local = make_synthetic(**kw, communities=16, locality=0.9)
    assert local.meta['options']['communities'] == 16
    assert local.meta['locality_measured'] >= 0.85  # 0.9 + a share of the global draws - dedup
    assert abs(local.meta['homophily_measured'] - 0.8) <= 0.06
    assert abs(local.num_edges / local.num_nodes - 16) <= 0.15 * 16
    assert torch.equal(canonical_edges(local.edge_index, local.num_nodes), local.edge_index)
    cut = [partition_stats(partition(g, 4), g.edge_index)['edge_cut_fraction'] for g in (flat, local)]
    assert cut[1] < 0.6 * cut[0], cut  # METIS finds the communities
    with pytest.raises(ValueError):
        make_synthetic(nodes=100, communities=0)


def test_aligned_communities_follow_the_classes():
    """aligned = 1 with one community per class: every node's community is its class, so an edge
    stays inside a community exactly when its ends share a class. aligned = 0 draws the graph
    made before the option existed (communities independent of the classes)."""
    kw = dict(nodes=3000, classes=6, avg_degree=8, features=4, homophily=0.7, seed=1,
              communities=6, locality=0.9)
    g = make_synthetic(**kw, aligned=1.0)
    assert g.meta['locality_measured'] == g.meta['homophily_measured']
    assert g.meta['options']['aligned'] == 1.0
    plain = make_synthetic(**kw)
    assert _same(plain, make_synthetic(**kw, aligned=0.0)) and 'aligned' not in plain.meta['options']
    assert plain.meta['locality_measured'] != plain.meta['homophily_measured']
    with pytest.raises(ValueError):
        make_synthetic(nodes=100, communities=4, aligned=1.5)
