"""SAT's predictor and the graph it runs on (docs/methods.md 10.1; used by baselines/sat.py): the
temporal graph T_m of a worker (its part's rows, both edge directions, halo-halo edges gathered
from their owners, self-loops), restricted to what a 2-layer GCN needs for the halo rows, and the
reference code's LSTM + sum-aggregation GCN (``auxiliary_models/lstm_gcn.py``).

Shapes: a window ``[k, W, F]`` over the k nodes the predictor runs on -> ``[k, F]``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from digest.runtime import comm


# -- the temporal graph ---------------------------------------------------------------------------

class TemporalGraph:
    """T_m restricted to the nodes the predictor must run on.

    Args:
        n_inner, n_halo: local rows (inner first, then halo, as the LocalPart).
        src, dst: local edges of T_m, both directions, without self-loops.
        hops: 2 = only the 2-hop neighbourhood of the halo rows (all a 2-layer GCN needs for
            them); None = every node of T_m.
    Attributes: ``nodes [k]`` local rows run on (sorted), ``adj`` sparse ``[k, k]`` (ones on the
    edges among them, plus self-loops), ``halo_pos [n_halo]`` positions of the halo rows in
    ``nodes``.
    """

    def __init__(self, n_inner: int, n_halo: int, src: Tensor, dst: Tensor, hops: int | None = 2):
        n = n_inner + n_halo
        if hops is None:
            keep = torch.ones(n, dtype=torch.bool)
        else:
            keep = torch.zeros(n, dtype=torch.bool)
            keep[n_inner:] = True
            for _ in range(hops):  # T_m is symmetric: in-neighbours = out-neighbours
                reached = keep.clone()
                reached[dst[keep[src]]] = True
                keep = reached
        self.nodes = keep.nonzero().squeeze(1)
        pos = torch.full((n,), -1, dtype=torch.long)
        pos[self.nodes] = torch.arange(self.nodes.numel())
        inside = keep[src] & keep[dst]
        k = int(self.nodes.numel())
        loops = torch.arange(k)
        rows = torch.cat([pos[dst[inside]], loops])
        cols = torch.cat([pos[src[inside]], loops])
        self.adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(rows.numel()),
                                           (k, k), check_invariants=False).coalesce()
        self.halo_pos = pos[n_inner:]

    def to(self, device) -> "TemporalGraph":
        self.nodes, self.adj = self.nodes.to(device), self.adj.to(device)
        self.halo_pos = self.halo_pos.to(device)
        return self


def temporal_edges(part) -> tuple[Tensor, Tensor]:
    """Local (src, dst) of T_m for this worker's ``part``: its own edges in both directions plus
    the halo-halo edges, which the owners of their destinations find (one start-up
    ``all_gather_object`` of halo id lists, one of edge lists). Collective: every worker calls it.
    No self-loops, no duplicates."""
    ids = part.global_ids
    n_inner = part.n_inner
    src, dst = part.edge_index
    halos = comm.all_gather_object(ids[n_inner:].clone())
    gsrc, gdst = ids[src], ids[dst]  # my edges: every dst is mine
    found = {}
    for m, halo in enumerate(halos):
        if m == part.rank or halo.numel() == 0:
            continue
        both = torch.isin(gdst, halo) & torch.isin(gsrc, halo)
        if bool(both.any()):
            found[m] = torch.stack([gsrc[both], gdst[both]])
    everyone = comm.all_gather_object(found)
    extra = [d[part.rank] for d in everyone if part.rank in d]
    s, d = torch.cat([src, dst]), torch.cat([dst, src])
    if extra:
        order, where = torch.sort(ids)  # global -> local by binary search
        g = torch.cat(extra, 1)
        loc = where[torch.searchsorted(order, g)]
        s, d = torch.cat([s, loc[0], loc[1]]), torch.cat([d, loc[1], loc[0]])
    keep = s != d
    n = int(ids.numel())
    key = torch.unique(d[keep] * n + s[keep])
    return key % n, key // n


# -- the predictor --------------------------------------------------------------------------------

class Predictor(nn.Module):
    """One-layer LSTM over each node's window, then a 2-layer GCN with plain sum aggregation
    (``adj`` includes the self-loops). ``[k, W, F] -> [k, F]``.

    ``residual``: the output is a base plus the GCN's, whose last layer starts at zero, so
    training learns a correction to the base (a choice; the reference predicts the rows
    themselves). ``base``: ``last`` = the last snapshot (the store rows: untrained, DIGEST) or
    ``mean`` = the window's mean (untrained, :class:`WindowMean`)."""

    def __init__(self, width: int, residual: bool = False, base: str = "last"):
        super().__init__()
        self.residual, self.base = residual, base
        self.lstm = nn.LSTM(width, width, num_layers=1, batch_first=True)
        self.lin1, self.lin2 = nn.Linear(width, width), nn.Linear(width, width)
        if residual:
            nn.init.zeros_(self.lin2.weight)
            nn.init.zeros_(self.lin2.bias)

    def forward(self, window: Tensor, adj: Tensor) -> Tensor:
        _, (h, _) = self.lstm(window)  # final hidden state, zero initial state
        h = F.relu(torch.sparse.mm(adj, h[0] @ self.lin1.weight.t()) + self.lin1.bias)
        out = torch.sparse.mm(adj, h @ self.lin2.weight.t()) + self.lin2.bias
        if not self.residual:
            return out
        return (window.mean(1) if self.base == "mean" else window[:, -1]) + out


class Identity(nn.Module):
    """The last snapshot as it is: the store rows for the halo (DIGEST)."""

    def forward(self, window: Tensor, adj: Tensor) -> Tensor:
        return window[:, -1]


class WindowMean(nn.Module):
    """The mean of the window's snapshots, learned nothing: an ablation that asks whether the
    rows' own history predicts them (with sync snapshots: the mean of the last W refreshes,
    which averages away the dropout noise of single refreshes and lags their drift)."""

    def forward(self, window: Tensor, adj: Tensor) -> Tensor:
        return window.mean(1)


def make_predictor(kind: str, width: int, seed: int, residual: bool = False,
                   base: str = "last") -> nn.Module:
    """The same initial parameters on every worker, without touching the global random stream."""
    if kind == "identity":
        return Identity()
    if kind == "mean":
        return WindowMean()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Predictor(width, residual, base)
