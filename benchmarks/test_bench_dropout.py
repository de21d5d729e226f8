"""Dropout on a hidden layer's rows, forward and backward: the float masks of
``digest.models.dropout.dropout`` (16-bit random lanes compared straight into floats) against
``torch.nn.functional.dropout`` (``bernoulli_``). Same shape as a Physics part's hidden rows.

    python -m pytest benchmarks/test_bench_dropout.py --benchmark-only --benchmark-group-by=param:shape
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

SHAPES = [(8623, 256), (100000, 64)]


def _step(drop, x):
    y = drop(x)
    y.backward(torch.ones_like(y))
    x.grad = None


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("kind", ["lanes", "bernoulli"])
def test_dropout_fwd_bwd(benchmark, shape, kind):
    from digest.models.dropout import dropout
    from digest.runtime.perf import tune_allocator
    tune_allocator()  # as a worker runs (python -m digest train)
    torch.manual_seed(0)
    x = torch.randn(shape, requires_grad=True)
    drop = (lambda t: dropout(t, 0.5, True)) if kind == "lanes" else (lambda t: F.dropout(t, 0.5, True))
    benchmark.pedantic(_step, args=(drop, x), rounds=20, iterations=1, warmup_rounds=2)
    benchmark.extra_info.update(shape=list(shape), p=0.5, threads=torch.get_num_threads())
