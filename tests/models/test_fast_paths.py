"""The hot-path implementations compute what the plain formulations compute: sparse input
features (CSR + precomputed transpose), the sparse product with a precomputed transpose, the
integer-mask dropout, and the product of the inner and halo blocks without concatenation."""
from __future__ import annotations

import pytest
import torch

from digest.runtime import comm, perf
from digest.data.cache import prepare_partition
from digest.config import TrainConfig
from digest.models import GCN
from digest.models.base import GraphView
from digest.models.dropout import dropout, float_keep_mask, keep_mask
from digest.models.features import SparseFeatures, sparse_linear
from digest.models.sparse import csr, spmm
from digest.data.synthetic import make_synthetic
from digest.training.trainer import Trainer
from helpers import run_workers


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
    assert torch.equal(feats.rows(0, 25).to_dense(), x[:25])
    assert torch.equal(feats.rows(0, 25).csr_t().to_dense(), x[:25].t())
    assert torch.equal(feats.rows(25, 60).to_dense(), x[25:])
    assert torch.equal(feats.rows(25, 60).csr_t().to_dense(), x[25:].t())
    inner, halo = GCN.inputs(x.to_sparse_coo(), 25)
    assert torch.equal(inner.to_dense(), x[:25]) and torch.equal(halo.to_dense(), x[25:])
    assert GCN.inputs(x, 60)[1] is None and torch.equal(GCN.inputs(x, 25)[1], x[25:])



def test_sparse_linear_of_two_blocks_shares_one_weight_gradient():
    # inner and halo input rows through one node: outputs = each block's product; the weight
    # gradient sums both blocks' contributions (and skips a block whose output is unused)
    x = _sparse_x()
    feats = SparseFeatures(x.to_sparse_coo())
    inner, halo = feats.rows(0, 25), feats.rows(25, 60)
    w1 = torch.randn(7, x.size(1), requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()
    out_i, out_h = sparse_linear(w1, inner, halo)
    assert out_i.shape == (25, 7) and out_h.shape == (35, 7)
    assert torch.allclose(out_i, x[:25] @ w2.t(), atol=1e-5)
    assert torch.allclose(out_h, x[25:] @ w2.t(), atol=1e-5)
    g_i, g_h = torch.randn(25, 7), torch.randn(35, 7)
    (out_i * g_i).sum().add((out_h * g_h).sum()).backward()
    (x @ w2.t()).backward(torch.cat([g_i, g_h]))
    assert torch.allclose(w1.grad, w2.grad, atol=1e-4)
    w1.grad = w2.grad = None
    out_i, out_h = sparse_linear(w1, inner, halo)
    out_h.backward(g_h)  # the inner block's output takes no part: its gradient is None
    (x[25:] @ w2.t()).backward(g_h)
    assert torch.allclose(w1.grad, w2.grad, atol=1e-4)

def _blocks(a: torch.Tensor, n: int) -> GraphView:
    inner, halo = a[:, :n], a[:, n:]
    return GraphView(a.size(0), a.size(1), adj=inner.to_sparse_csr(),
                     adj_t=inner.t().contiguous().to_sparse_csr(), adj_halo=halo.to_sparse_csr(),
                     adj_halo_t=halo.t().contiguous().to_sparse_csr())


def test_spmm_of_inner_and_halo_blocks_matches_dense():
    """[A_inner | A_halo] @ [inner; halo] equals the dense product of the concatenated rows, and
    so do both gradients; a constant halo (DIGEST's stale rows) gets no gradient."""
    a = _sparse_x(30, 50, 0.2, seed=1)
    view = _blocks(a, 30)
    inner, halo = torch.randn(30, 8, requires_grad=True), torch.randn(20, 8, requires_grad=True)
    ref = torch.cat([inner, halo]).detach().requires_grad_()
    out1, out2 = spmm(view, inner, halo), a @ ref
    assert torch.allclose(out1, out2, atol=1e-5)
    g = torch.randn_like(out2)
    out1.backward(g)
    out2.backward(g)
    assert torch.allclose(inner.grad, ref.grad[:30], atol=1e-5)
    assert torch.allclose(halo.grad, ref.grad[30:], atol=1e-5)
    # constant halo rows: the backward never touches the halo block's transpose
    view.adj_halo_t = None
    x = inner.detach().requires_grad_()
    spmm(view, x, halo.detach()).backward(g)
    assert torch.allclose(x.grad, ref.grad[:30], atol=1e-5)
    # no halo block (the induced graph): the inner block alone
    assert torch.allclose(spmm(_blocks(a[:, :30], 30), inner), a[:, :30] @ inner, atol=1e-5)


def test_spmm_keeps_an_empty_halo_in_the_graph():
    """A worker that receives no halo rows still runs the backward of its exchange (a collective
    its peers wait in): the empty halo must get a (zero-row) gradient."""
    a = _sparse_x(10, 10, 0.3, seed=2)
    view = GraphView(10, 10, adj=a.to_sparse_csr(), adj_t=a.t().contiguous().to_sparse_csr())
    inner = torch.randn(10, 4, requires_grad=True)
    empty = torch.zeros(0, 4, requires_grad=True)
    spmm(view, inner, empty).sum().backward()
    assert empty.grad is not None and empty.grad.shape == (0, 4)


def test_float_keep_mask_is_the_bool_mask_as_floats():
    torch.manual_seed(3)
    mask, scale = keep_mask((1000, 7), 0.3)
    torch.manual_seed(3)
    floats, same_scale = float_keep_mask((1000, 7), 0.3)
    assert torch.equal(floats, mask.float()) and same_scale == scale


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
    torch.manual_seed(5)
    mask, scale = keep_mask(feats.values().shape, 0.5)
    torch.manual_seed(5)
    dropped = dropout(feats, 0.5, True)  # the same draw; only the kept entries are stored
    c = feats.csr
    ref = torch.sparse_csr_tensor(c.crow_indices(), c.col_indices(), c.values() * mask * scale,
                                  c.shape).to_dense()
    assert dropped.values().numel() == int(mask.sum()) < feats.values().numel()
    assert torch.equal(dropped.to_dense(), ref)
    assert torch.equal(dropped.csr_t().to_dense(), ref.t())
    w1 = torch.randn(7, ref.size(1), requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()
    out1, out2 = dropped.linear(w1), ref @ w2.t()
    g = torch.randn_like(out2)
    out1.backward(g)
    out2.backward(g)
    assert torch.allclose(out1, out2, atol=1e-5) and torch.allclose(w1.grad, w2.grad, atol=1e-5)


def _losses(cfg, rt, part, methods=("exact", "partition")):
    """Every method's 8 losses, summed over the workers (one launch for all)."""
    out = {}
    for method in methods:
        trainer = Trainer(cfg.replace(method=method), rt, part)
        losses = torch.tensor([trainer.step(e) for e in range(8)], dtype=torch.float64)
        out[method] = comm.all_reduce_(losses, category=None)
    return out


def test_sparse_inputs_train_like_dense_inputs(tmp_path):
    """Exact training with sparse input features (kept sparse by GCN) gives the losses of the
    same graph with dense features, with 1 and 2 workers; so does the partition-based method,
    which reads the induced rows of the features."""
    dense = make_synthetic(nodes=240, classes=4, avg_degree=6, features=30, seed=7)
    x = dense.x.clone()
    x[x.abs() < 1.2] = 0  # ~25% density
    dense.x = x
    sparse = make_synthetic(nodes=240, classes=4, avg_degree=6, features=30, seed=7)
    sparse.x = x.to_sparse_coo().coalesce()
    runs = {}
    cfg = TrainConfig.of(hidden=12, layers=3, dropout=0.0, lr=0.01)
    for name, graph in (("dense", dense), ("sparse", sparse)):
        for world in (1, 2):
            d = prepare_partition(f"fp-{name}", world, "metis", 0, tmp_path, graph=graph)
            for method, losses in run_workers(_losses, cfg, d, world)[0].items():
                runs[name, world, method] = losses
    assert len(runs) == 8
    for key, losses in runs.items():
        ref = runs["dense", 1, "exact"] if key[2] == "exact" or key[1] == 1 else \
            runs["dense", key[1], "partition"]
        assert (losses - ref).abs().max() < 1e-4, key
    assert GCN.features(sparse.x).__class__ is SparseFeatures



def test_csr_orders_entries_by_row_then_column_and_sums_duplicates():
    """Unique edges (one sort, no coalesce) and duplicated ones (coalesce) give the CSR that
    ``coalesce().to_sparse_csr()`` gives: row v holds its sources in column order."""
    src, dst = torch.tensor([2, 0, 1, 0, 2]), torch.tensor([1, 1, 0, 2, 0])
    val = torch.tensor([1., 2., 3., 4., 5.])
    a = csr(src, dst, val, 3, 3)
    assert a.crow_indices().tolist() == [0, 2, 4, 5]
    assert a.col_indices().tolist() == [1, 2, 0, 2, 0]
    assert a.values().tolist() == [3., 5., 2., 1., 4.]
    dup = csr(torch.cat([src, src[:1]]), torch.cat([dst, dst[:1]]), torch.cat([val, val[:1]]), 3, 3)
    assert dup.to_dense().tolist() == [[0., 3., 5.], [2., 0., 2.], [4., 0., 0.]]


# What both allocator probes start with: digest/runtime/perf.py loaded alone (no torch to
# import) from the last argument, and libc's malloc and free.
_PERF_AND_LIBC = """
import ctypes, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("perf", sys.argv[-1])
perf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(perf)
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
"""

_MALLOC_PROBE = _PERF_AND_LIBC + """
class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
def mmapped(mb):  # is a block of mb MiB served by a fresh mmap (not from the heap)?
    before = libc.mallinfo2().hblkhd
    p = libc.malloc(mb << 20)
    out = libc.mallinfo2().hblkhd - before >= mb << 20
    libc.free(p)
    return out
calls = [perf.tune_allocator(*a) for a in json.loads(sys.argv[1])]
print(json.dumps({"calls": calls, "8": mmapped(8), "64": mmapped(64)}))
"""


def _allocator(env: dict, calls=((),)) -> dict:
    """perf.tune_allocator called as ``calls`` say in a fresh process (the setting is the
    process's), then whether glibc serves 8 and 64 MiB blocks by mmap."""
    import ctypes
    import json
    import os
    import subprocess
    import sys
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        import pytest
        pytest.skip("not glibc >= 2.33 (no mallinfo2 to see where a block came from)")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DIGEST_MALLOC")}, **env}
    done = subprocess.run([sys.executable, "-c", _MALLOC_PROBE, json.dumps(list(map(list, calls))),
                           perf.__file__], env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    return json.loads(done.stdout)


def test_tune_allocator_keeps_large_blocks_in_the_heap_once_per_process():
    """Tuned (the default): blocks up to 1 GiB come from the heap, not a fresh mmap each; a later
    call with another threshold changes nothing (the first setting holds). DIGEST_MALLOC_TUNE=0:
    glibc's defaults (a large block is mmapped). DIGEST_MALLOC_MB: the threshold."""
    assert _allocator({}, calls=((), (16 << 20,))) == {"calls": [True, True], "8": False,
                                                       "64": False}
    assert _allocator({"DIGEST_MALLOC_TUNE": "0"}) == {"calls": [False], "8": True, "64": True}
    assert _allocator({"DIGEST_MALLOC_MB": "16"}) == {"calls": [True], "8": False, "64": True}


_TRIM_PROBE = _PERF_AND_LIBC + """
def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024
perf.tune_allocator()
p = libc.malloc(256 << 20)
ctypes.memset(p, 1, 256 << 20)  # resident
libc.free(p)
kept = rss_mb()
released = perf.release_free_memory()
print(released, round(kept - rss_mb()))
"""


def test_release_free_memory_returns_a_freed_block_the_tuned_heap_kept():
    """Tuned, a freed 256 MiB block stays resident (the heap keeps it); ``release_free_memory``
    hands it back: the process's resident memory falls by about its size."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", _TRIM_PROBE, perf.__file__], capture_output=True,
                          text=True, timeout=60, check=True)
    released, fell_mb = done.stdout.split()
    assert released == "True" and int(fell_mb) >= 240


@pytest.mark.parametrize("chunk_rows", [7, 1 << 16])  # 50 rows in 8 blocks (the last short) or one
def test_dropped_rows_linear_matches_dropout_then_linear(chunk_rows, monkeypatch):
    from digest.models import dropout as dropout_mod
    from digest.models.dropout import DroppedRows
    monkeypatch.setattr(dropout_mod, "CHUNK_ROWS", chunk_rows)
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
