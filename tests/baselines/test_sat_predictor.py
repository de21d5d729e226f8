"""SAT's predictor on its own (docs/methods.md 10.1, baselines/sat_predictor.py): the 2-hop
restriction gives the same rows, the reference architecture and the residual form learn a linear
drift, the residual on the window's mean starts at the mean."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from baselines.sat_predictor import TemporalGraph, make_predictor


def random_graph(n_inner, n_halo, edges, seed):
    g = torch.Generator().manual_seed(seed)
    n = n_inner + n_halo
    e = torch.randint(0, n, (2, edges), generator=g)
    e = e[:, e[0] != e[1]]
    key = torch.unique(torch.cat([e[1] * n + e[0], e[0] * n + e[1]]))
    return key % n, key // n


def test_two_hop_restriction_gives_the_same_prediction():
    """Only the halo rows are used, so running on their 2-hop neighbourhood in T_m gives the same
    rows as running on all of T_m (a sparse graph, so the neighbourhood is a strict subset)."""
    n_inner, n_halo, width, W = 60, 6, 5, 4
    src, dst = random_graph(n_inner, n_halo, 70, seed=1)
    near = TemporalGraph(n_inner, n_halo, src, dst, hops=2)
    full = TemporalGraph(n_inner, n_halo, src, dst, hops=None)
    assert near.nodes.numel() < full.nodes.numel() == n_inner + n_halo
    P = make_predictor("lstm-gcn", width, seed=3)
    window = torch.randn(n_inner + n_halo, W, width, generator=torch.Generator().manual_seed(2))
    a = P(window[near.nodes], near.adj)[near.halo_pos]
    b = P(window[full.nodes], full.adj)[full.halo_pos]
    assert torch.allclose(a, b, atol=1e-6)
    # and the graph is T_m with self-loops: every edge, both directions, plus the diagonal
    dense = full.adj.to_dense()
    want = torch.eye(n_inner + n_halo)
    want[dst, src] = 1
    assert torch.equal(dense, want)


def _drift_run(seed: int, steps: int = 200, lr: float = 0.01, residual: bool = False):
    """Halo and inner rows drift linearly, x_t = t B; pairs (window up to t, x_{t+1}[H]) for
    t = 1..6 (W = 5, fewer at the start); the predictor trained ``steps`` Adam steps cycling over
    them. Returns (relative errors before, after, of the stale rows x_t[H]) per pair."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    n_inner, n_halo, width, W = 12, 4, 4, 5
    src, dst = random_graph(n_inner, n_halo, 16, seed)
    g = TemporalGraph(n_inner, n_halo, src, dst)
    B = torch.randn(n_inner + n_halo, width) * 0.2
    P = make_predictor("lstm-gcn", width, seed=1, residual=residual)
    opt = torch.optim.Adam(P.parameters(), lr=lr)
    pairs = []
    for t in range(1, 7):
        window = torch.stack([s * B for s in range(max(0, t - W + 1), t + 1)], 1)[g.nodes]
        pairs.append((window, (t + 1) * B[n_inner:], t * B[n_inner:]))

    def errors():
        with torch.no_grad():
            return [float((P(w, g.adj)[g.halo_pos] - Z).norm() / Z.norm()) for w, Z, _ in pairs]
    before = errors()
    for i in range(steps):
        w, Z, _ = pairs[i % len(pairs)]
        opt.zero_grad()
        F.mse_loss(P(w, g.adj)[g.halo_pos], Z).backward()
        opt.step()
    stale = [float((S - Z).norm() / Z.norm()) for _, Z, S in pairs]
    return before, errors(), stale


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_predictor_learns_a_linear_drift(seed):
    """Training on its pairs halves the predictor's error on them. What it does NOT show: the
    spec's "a few predictor steps bring e_pred below e_stale" does not hold for the reference
    architecture (an LSTM, then a sum-aggregation GCN: no path that copies the last snapshot).
    Measured on this toy drift: after 200 Adam steps at lr 0.01, e_pred < e_stale on the pairs
    t = 2..4 for about half the seeds; in training a predictor takes one step per sync."""
    before, after, _ = _drift_run(seed)
    assert sum(after) < 0.5 * sum(before), (before, after)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_residual_predictor_starts_at_the_store_rows_and_learns_the_drift(seed):
    """--sat-residual: untrained, the prediction IS the last snapshot (the store rows: errors equal
    the staleness errors exactly); trained, it beats them on every pair."""
    before, after, stale = _drift_run(seed, residual=True)
    assert before == stale
    assert all(a < s for a, s in zip(after, stale)), (after, stale)


def test_residual_on_the_window_mean_starts_at_the_mean():
    """--sat-base mean: untrained, the residual predictor returns the window's mean exactly (the
    ``mean`` ablation); its GCN's output is what training changes."""
    torch.manual_seed(0)
    n_inner, n_halo, width = 6, 3, 4
    src, dst = random_graph(n_inner, n_halo, 10, 0)
    g = TemporalGraph(n_inner, n_halo, src, dst)
    window = torch.randn(int(g.nodes.numel()), 5, width)
    P = make_predictor("lstm-gcn", width, seed=1, residual=True, base="mean")
    mean = make_predictor("mean", width, seed=1)
    assert torch.equal(P(window, g.adj), mean(window, g.adj))
    assert torch.equal(P(window, g.adj), window.mean(1))
    with torch.no_grad():
        P.lin2.bias.fill_(1.0)
    assert torch.allclose(P(window, g.adj), window.mean(1) + 1.0)
