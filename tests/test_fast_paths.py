"""The hot-path implementations (issue 7) compute what the plain formulations compute: sparse input
features (CSR + precomputed transpose), the sparse product with a precomputed transpose, the
integer-mask dropout, and the one-buffer halo exchange."""
from __future__ import annotations

import torch

from digest import comm, perf
from digest.cache import prepare_partition
from digest.config import TrainConfig
from digest.halo import HaloPlan, exchange, with_halo
from digest.models import GCN
from digest.models.base import GraphView, SparseFeatures, dropout, keep_mask, spmm
from digest.synthetic import make_synthetic
from digest.trainer import Trainer
from distributed import run_workers


def _sparse_x(n=60, f=40, density=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, f, generator=g)
    x[torch.rand(n, f, generator=g) > density] = 0
    x[3] = 0  # an empty row
    return x


def test_sparse_features_linear_matches_dense():
    x = _sparse_x()
    feats = SparseFeatures(x.to_sparse_coo())
    w1 = torch.randn(7, x.size(1), requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()
    out_sparse, out_dense = feats.linear(w1), x @ w2.t()
    assert torch.allclose(out_sparse, out_dense, atol=1e-5)
    g = torch.randn_like(out_dense)
    out_sparse.backward(g)
    out_dense.backward(g)
    assert torch.allclose(w1.grad, w2.grad, atol=1e-4)
    # the transpose's structure and value permutation really are X^T
    assert torch.equal(feats.csr_t().to_dense(), x.t())
    assert torch.equal(feats.first_rows(25).to_dense(), x[:25])
    assert torch.equal(feats.first_rows(25).csr_t().to_dense(), x[:25].t())


def test_spmm_with_precomputed_transpose_matches_dense():
    a = _sparse_x(30, 50, 0.2, seed=1)
    adj, adj_t = a.to_sparse_csr(), a.t().contiguous().to_sparse_csr()
    view = GraphView(30, 50, adj=adj, adj_t=adj_t)
    h1 = torch.randn(50, 8, requires_grad=True)
    h2 = h1.detach().clone().requires_grad_()
    out1, out2 = spmm(view, h1), a @ h2
    assert torch.allclose(out1, out2, atol=1e-5)
    g = torch.randn_like(out2)
    out1.backward(g)
    out2.backward(g)
    assert torch.allclose(h1.grad, h2.grad, atol=1e-5)


def test_dropout_keeps_the_right_fraction_and_scales():
    torch.manual_seed(0)
    for p in (0.1, 0.5, 0.8):
        mask, scale = keep_mask((200_000,), p)
        assert abs(float(mask.float().mean()) - (1 - p)) < 0.01
        assert abs(scale * (1 - p) - 1) < 1e-3
    x = torch.randn(300, 100, requires_grad=True)
    out = dropout(x, 0.5, True)
    kept = out != 0
    assert torch.allclose(out[kept], 2 * x[kept])
    out.sum().backward()
    assert torch.equal(x.grad != 0, kept) and torch.allclose(x.grad[kept], torch.tensor(2.0))
    assert dropout(x, 0.5, False) is x and dropout(x, 0.0, True) is x
    feats = SparseFeatures(_sparse_x().to_sparse_coo())
    dropped = dropout(feats, 0.5, True)
    v0, v1 = feats.values(), dropped.values()
    assert v1.shape == v0.shape and bool(((v1 == 0) | torch.isclose(v1, 2 * v0)).all())
    assert torch.equal(dropped.csr_t().to_dense(), dropped.csr.to_dense().t())


def _halo_grads(cfg, rt, part):
    plan = HaloPlan.of(part)
    h = torch.randn(part.n_inner, 5, generator=torch.Generator().manual_seed(rt.rank))
    a, b = h.clone().requires_grad_(), h.clone().requires_grad_()
    weight = torch.randn(part.n_inner + part.n_halo, 5, generator=torch.Generator().manual_seed(9))
    out_a = with_halo(a, plan)
    out_b = torch.cat([b, exchange(b, plan)])
    (out_a * weight).sum().backward()
    (out_b * weight).sum().backward()
    return torch.equal(out_a, out_b), torch.allclose(a.grad, b.grad, atol=1e-6)


def test_one_buffer_halo_exchange_equals_cat_of_exchange(tmp_path):
    graph = make_synthetic(nodes=200, classes=3, avg_degree=6, features=8, seed=4)
    part_dir = prepare_partition("fasthalo", 3, "metis", 0, tmp_path, graph=graph)
    for same_rows, same_grads in run_workers(_halo_grads, TrainConfig(), part_dir, 3):
        assert same_rows and same_grads


def _losses(cfg, rt, part):
    trainer = Trainer(cfg, rt, part)
    losses = torch.tensor([trainer.step(e) for e in range(8)], dtype=torch.float64)
    return comm.all_reduce_(losses, category=None)


def test_sparse_inputs_train_like_dense_inputs(tmp_path):
    """Exact training with sparse input features (kept sparse by GCN) gives the losses of the
    same graph with dense features, with 1 and 2 workers."""
    dense = make_synthetic(nodes=240, classes=4, avg_degree=6, features=30, seed=7)
    x = dense.x.clone()
    x[x.abs() < 1.2] = 0  # ~25% density
    dense.x = x
    sparse = make_synthetic(nodes=240, classes=4, avg_degree=6, features=30, seed=7)
    sparse.x = x.to_sparse_coo().coalesce()
    runs = {}
    for name, graph in (("dense", dense), ("sparse", sparse)):
        for world in (1, 2):
            d = prepare_partition(f"fp-{name}", world, "metis", 0, tmp_path, graph=graph)
            for method in ("exact", "partition"):  # partition: the induced rows of the features
                cfg = TrainConfig(hidden=12, layers=3, dropout=0.0, lr=0.01, method=method)
                runs[name, world, method] = run_workers(_losses, cfg, d, world)[0]
    for key, losses in runs.items():
        ref = runs["dense", 1, "exact"] if key[2] == "exact" or key[1] == 1 else \
            runs["dense", key[1], "partition"]
        assert (losses - ref).abs().max() < 1e-4, key
    assert GCN.features(sparse.x).__class__ is SparseFeatures


def test_tune_allocator_is_idempotent():
    first = perf.tune_allocator()
    assert perf.tune_allocator() is first


def test_dropped_rows_linear_matches_dropout_then_linear():
    from digest.models.base import DroppedRows
    torch.manual_seed(1)
    x = torch.randn(50, 12)
    rows = DroppedRows(x, 0.3)
    w1 = torch.randn(6, 12, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()
    out1 = rows.linear(w1)
    out2 = (x * rows.mask * rows.scale) @ w2.t()
    assert torch.allclose(out1, out2, atol=1e-5)
    g = torch.randn_like(out2)
    out1.backward(g)
    out2.backward(g)
    assert torch.allclose(w1.grad, w2.grad, atol=1e-5)
    assert abs(float(rows.mask.float().mean()) - 0.7) < 0.1
