"""Each worker's computation in one training step, counted from its local graph and the model
(docs/methods.md section 13): what the time model multiplies by a compute rate.

Four kinds of work, as the kernels of digest/models run them:
- ``dense``: floating-point operations of dense products (2 per multiply-add);
- ``sparse``: (stored entry x column) of sparse-dense products over the local graph;
- ``sparse_x``: (stored input value x column) of the first layer on sparse input features;
- ``elem``: values touched by elementwise work (dropout masks, ReLU, their gradients, the
  optimiser's update, the copies of exchanged rows).

GCN and GraphSAGE run the same kernels (models/gcn.py, models/sage.py): a layer aggregates first
when its input is not wider than its output, else transforms first; the first layer always
transforms first (sparse or lazily dropped inputs). What the halo policy supplies decides the
rest: ``grad`` halo rows get a gradient (one more sparse product backwards, and the dense
gradient of the halo rows), ``const`` ones do not, ``none`` reads the induced subgraph only.
GAT's attention kernels are not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from .job import PartCounts

KINDS = ("dense", "sparse", "sparse_x", "elem")
MODELLED = ("gcn", "sage")


@dataclass
class Work:
    """Counts of one worker's step (see the module docstring for the units)."""

    dense: float = 0.0
    sparse: float = 0.0
    sparse_x: float = 0.0
    elem: float = 0.0

    def __add__(self, other: "Work") -> "Work":
        return Work(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def scaled(self, k: float) -> "Work":
        return Work(*(k * getattr(self, f.name) for f in fields(self)))


def step_work(c: PartCounts, widths: list[int], model: str, halo: str, dropout: float,
              sparse_x: bool, params: int, backward: bool = True) -> Work:
    """One training step (``backward=False``: a forward pass alone, a fill's) of a worker with
    counts ``c`` on a model of ``widths`` (F_0 .. F_L), its halo policy reading ``halo`` rows
    (``grad``, ``const`` or ``none``).

    Shapes: widths ``[L + 1]``."""
    if model not in MODELLED:
        raise ValueError(f"no compute model for {model!r} (only {', '.join(MODELLED)})")
    n = c.n_inner
    h = 0 if halo == "none" else c.n_halo
    loops = n if model == "gcn" else 0  # GCN's self-loops are entries of its adjacency
    e_in, e_h = c.e_inner + loops, (0 if halo == "none" else c.e_halo)
    grad_h = halo == "grad"
    root = model == "sage"  # SAGE adds a dense root term lin_r(h) on the inner rows
    w, L, drop = Work(), len(widths) - 1, dropout > 0
    for l in range(L):
        fi, fo = widths[l], widths[l + 1]
        if l == 0:  # transform first, no gradient into the (constant) inputs
            if sparse_x:
                w.sparse_x += (c.x_inner + (c.x_halo if h else 0)) * fo * (1 + backward)
                w.elem += (c.x_inner + c.x_halo) * drop
            else:
                w.dense += 2 * (n + h) * fi * fo * (1 + backward)
                w.elem += (n + h) * fi * drop
            w.sparse += (e_in + e_h) * fo * (1 + backward)
        else:
            w.elem += (n + h) * fi * drop + backward * (n + (h if grad_h else 0)) * fi * drop
            if fi <= fo:  # aggregate first: sparse on fi columns, dense on the inner rows
                w.sparse += (e_in + e_h) * fi + backward * (e_in + (e_h if grad_h else 0)) * fi
                w.dense += 2 * n * fi * fo * (1 + 2 * backward)
            else:  # transform first: dense on every row read, sparse on fo columns
                w.dense += 2 * (n + h) * fi * fo * (1 + backward) \
                    + backward * 2 * (n + (h if grad_h else 0)) * fi * fo
                w.sparse += (e_in + e_h) * fo + backward * (e_in + (e_h if grad_h else 0)) * fo
        if root:
            w.dense += 2 * n * fi * fo * (1 + 2 * backward) if l else 2 * n * fi * fo * (1 + backward)
        if l < L - 1:
            w.elem += n * fo * (1 + backward)  # ReLU and its gradient
    if backward:
        w.elem += c.train * widths[-1] + 4 * params  # loss; the optimiser and gradient copies
    return w
