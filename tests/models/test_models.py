"""Each model's convolution (digest/models) equals the torch_geometric layer it is built on, for
every kind of input rows a layer receives: dense rows, sparse input features (``SparseFeatures``)
and dense rows whose dropout mask is applied inside the first layer's product (``DroppedRows``).
Outputs and parameter gradients, on a tiny hand-made local graph with 4 inner and 2 halo rows."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch_geometric.nn import GATConv, SAGEConv

from digest.models import GAT, SAGE
from digest.models.dropout import DroppedRows
from digest.models.features import SparseFeatures

N_INNER, N_HALO = 4, 2
# local (src, dst): inner row 3 has no in-neighbour (an empty mean), halo rows 4 and 5 send only
EDGES = torch.tensor([[1, 2, 4, 0, 5, 4, 2], [0, 0, 0, 1, 1, 2, 1]])
PART = SimpleNamespace(edge_index=EDGES, n_inner=N_INNER, n_halo=N_HALO,
                       deg=torch.bincount(EDGES[1], minlength=N_INNER))


def _rows(kind: str, x: torch.Tensor):
    """(what the layer reads, the dense rows it stands for) for one block of rows."""
    if kind == "dense":
        return x, x
    if kind == "sparse":
        return SparseFeatures(x.to_sparse_coo()), x
    rows = DroppedRows(x, 0.5)
    return rows, x * rows.mask * rows.scale


def _inputs(kind: str, width: int):
    torch.manual_seed(0)
    x = torch.randn(N_INNER + N_HALO, width)
    x[x.abs() < 0.5] = 0  # sparse enough to be worth a CSR
    inner, inner_ref = _rows(kind, x[:N_INNER])
    halo, halo_ref = _rows(kind, x[N_INNER:])
    return inner, halo, torch.cat([inner_ref, halo_ref])


def _pyg(ours: torch.nn.Module, cls, width: int, out: int, **kw) -> torch.nn.Module:
    ref = cls(width, out, **kw)
    ref.load_state_dict(ours.state_dict())
    return ref


def _check(ours, ref, out, expected):
    assert out.shape == expected.shape
    assert torch.allclose(out, expected, atol=1e-5)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    for (name, p), q in zip(ours.named_parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5), name


@pytest.mark.parametrize("kind", ["dense", "sparse", "lazy"])
@pytest.mark.parametrize("width,out", [(5, 3), (3, 5)])  # transform first / aggregate first
def test_sage_conv_is_pyg_mean_sage(kind, width, out):
    model = SAGE(width, out, out, layers=1, dropout=0.0)
    ref = _pyg(model.convs[0], SAGEConv, width, out, aggr="mean")
    inner, halo, x = _inputs(kind, width)
    got = model.conv(0, inner, halo, SAGE.view(PART))
    _check(model.convs[0], ref, got, ref((x, x[:N_INNER]), EDGES, size=(6, N_INNER)))


@pytest.mark.parametrize("kind", ["dense", "sparse", "lazy"])
def test_gat_conv_is_pyg_gat_with_self_loops_on_inner_rows(kind):
    model = GAT(5, 3, 3, layers=1, dropout=0.0)
    ref = _pyg(model.convs[0], GATConv, 5, 3, add_self_loops=False)
    inner, halo, x = _inputs(kind, 5)
    loops = torch.arange(N_INNER).repeat(2, 1)
    got = model.conv(0, inner, halo, GAT.view(PART))
    _check(model.convs[0], ref, got, ref(x, torch.cat([EDGES, loops], 1))[:N_INNER])


def test_sage_induced_view_averages_inner_neighbours_only():
    """Partition-based SAGE: row 0's mean is over its inner in-neighbours 1 and 2 only."""
    view = SAGE.view(PART, induced=True)
    assert view.adj_halo is None and view.n_cols == N_INNER
    assert torch.equal(view.adj.to_dense()[0], torch.tensor([0.0, 0.5, 0.5, 0.0]))
    assert torch.equal(view.adj.to_dense()[3], torch.zeros(N_INNER))


def _whole_model(name: str, sparse: bool, lazy: bool, training: bool):
    """Model ``name`` (3 layers, dropout 0.5) on part 0 of the toy graph, with constant halo
    rows for layers 1 and 2: (logits, parameter gradients of their sum, the kinds of rows the
    first layer read). ``lazy=False`` turns the model's own ``lazy_input`` off."""
    from digest.data.local_graph import extract_part
    from digest.data.partition import build_book
    from digest.models import MODELS
    from helpers import PART_OF, toy_graph
    g = toy_graph(sparse=sparse, width=6)
    part = extract_part(g, build_book(PART_OF, g.edge_index, 3), 0)
    cls = MODELS[name]
    torch.manual_seed(0)
    model = cls(6, 4, 3, layers=3, dropout=0.5)
    if not lazy:
        model.lazy_input = False
    model.train(training)
    seen = []
    conv = model.conv
    model.conv = lambda layer, h, halo, view: (  # the first layer's inner and halo rows
        layer or seen.extend([type(h).__name__, type(halo).__name__]), conv(layer, h, halo, view))[1]
    consts = {l: torch.randn(part.n_halo, 4, generator=torch.Generator().manual_seed(l))
              for l in (1, 2)}
    torch.manual_seed(1)  # the dropout masks
    out = model(cls.inputs(part.x, part.n_inner), cls.view(part), lambda l, h: consts[l])
    out.sum().backward()
    return out, [p.grad for p in model.parameters()], seen


@pytest.mark.parametrize("name", ["gcn", "sage", "gat"])
def test_every_model_computes_on_sparse_and_lazily_dropped_inputs(name):
    """What ``sparse_input`` and ``lazy_input`` promise, for every model: sparse input features
    reach the first layer as they are (SparseFeatures) and give the dense features' logits and
    gradients; in training, dense constant inputs reach it with their dropout mask not yet applied
    (DroppedRows) and give the logits and gradients of dropout-then-dense with the same mask."""
    dense, dense_grads, kinds = _whole_model(name, sparse=False, lazy=True, training=False)
    sparse, sparse_grads, sparse_kinds = _whole_model(name, sparse=True, lazy=True, training=False)
    assert kinds == ["Tensor", "Tensor"] and sparse_kinds == ["SparseFeatures"] * 2
    assert torch.allclose(sparse, dense, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(sparse_grads, dense_grads))
    lazy, lazy_grads, lazy_kinds = _whole_model(name, sparse=False, lazy=True, training=True)
    plain, plain_grads, plain_kinds = _whole_model(name, sparse=False, lazy=False, training=True)
    assert lazy_kinds == ["DroppedRows"] * 2 and plain_kinds == ["Tensor"] * 2
    assert torch.allclose(lazy, plain, atol=1e-5) and not torch.allclose(lazy, dense, atol=1e-3)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(lazy_grads, plain_grads))
