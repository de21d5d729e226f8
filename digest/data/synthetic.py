"""Synthetic node-classification graphs: a degree-corrected stochastic block model (DC-SBM).

Why a generator: the suite must run anywhere (no downloads) and must reach ogbn-products scale
(2.4M nodes, ~62M directed edges) for the scaling experiments. Everything is vectorised numpy/torch:
the only Python loops run over sampling chunks and top-up rounds, never over nodes or edges.

``make_synthetic``'s keyword defaults are the 3,000-node graph that was the first embedded
default (``synthetic:preset=classic``); the embedded default and the OGB-shaped stand-ins
are named option sets in ``digest/data/presets.py``.
"""
from __future__ import annotations

import numpy as np
import torch

from .graph import Graph, canonical_edges, degree

# The ``split`` values make_synthetic takes (the registry checks a spec's against them).
SPLITS = ('random', 'popularity')

# Pairs sampled per chunk: bounds the float64/int64 temporaries to ~100 MB whatever the graph size.
_CHUNK = 4_000_000


def random_split(num_nodes: int, seed: int, train: float = 0.6, val: float = 0.2):
    """Seeded random train/val/test masks (the rest of the nodes is test).

    Shapes: three bool tensors ``[N]``, disjoint, covering every node.
    """
    perm = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(int(seed)))
    return _split_in_order(perm, train, val)


def popularity_split(node_degree: torch.Tensor, train: float, val: float):
    """OGB's split for ogbn-products (by sales rank), with the degree standing for popularity:
    the ``train`` fraction of most connected nodes trains, the next ``val`` validates, the rest
    (the least connected) is test. Ties go to the lower node id, so the split is a function of the
    graph alone.

    Shapes: node_degree ``[N]``; three bool tensors ``[N]``, disjoint, covering every node.
    """
    return _split_in_order(torch.argsort(-node_degree, stable=True), train, val)


def split_sizes(n: int, train: float, val: float) -> tuple[int, int, int]:
    """(train, val, test) node counts of a split of ``n`` nodes at fractions ``train``, ``val``
    (the rest is test); the file checks use it to refuse a rule that leaves a set empty."""
    n_train, n_val = int(round(train * n)), int(round(val * n))
    return n_train, n_val, n - n_train - n_val


def _split_in_order(order: torch.Tensor, train: float, val: float):
    """Train, val and test masks: the first ``train`` fraction of ``order``, the next ``val``,
    the rest."""
    n = order.numel()
    n_train, n_val, _ = split_sizes(n, train, val)
    masks = []
    for lo, hi in ((0, n_train), (n_train, n_train + n_val), (n_train + n_val, n)):
        m = torch.zeros(n, dtype=torch.bool)
        m[order[lo:hi]] = True
        masks.append(m)
    return tuple(masks)


def _propensities(rng: np.random.Generator, n: int, exponent: float, avg_degree: float):
    """Pareto degree propensities (tail exponent ``exponent``), capped so that a hub's expected
    degree stays below ~sqrt(N * d): uncapped hubs would mostly draw duplicate edges."""
    theta = (1.0 - rng.random(n)) ** (-1.0 / (exponent - 1.0))
    cap = max(1.0, np.sqrt(n * avg_degree) / avg_degree) * theta.mean()
    return np.minimum(theta, cap)


def _sample_pairs(rng, count, cum, lo, hi, total, y_sorted, order, homophily, local=None):
    """Draw ``count`` undirected pairs. Source ~ theta over all nodes; with probability
    ``homophily`` the target ~ theta inside the source's class, otherwise ~ theta over the
    OTHER classes (so the realised edge homophily is ``homophily``, not h + (1-h)/C).

    Nodes are ordered by class, so class c owns the mass interval [lo[c], hi[c]) of the
    cumulative propensity ``cum``; inverse-CDF sampling is a single searchsorted.
    ``local`` (see ``_Communities``) keeps a fraction of the targets in the source's community.
    """
    last = len(cum) - 1
    src_pos = np.minimum(np.searchsorted(cum, rng.random(count) * total, side='right'), last)
    c = y_sorted[src_pos]
    inside = rng.random(count) < homophily
    u = rng.random(count)
    dst = _targets(cum, order, inside, u, lo[c], hi[c] - lo[c], 0.0, total)
    src = order[src_pos]
    if local is not None:
        dst = local.retarget(rng, src, c, inside, u, dst)
    return np.stack([src, dst])


class _Communities:
    """K communities, independent of the classes unless ``aligned`` > 0 (that fraction of the
    nodes joins a community of its class): nodes ordered by (community, class), so each
    community k and each (k, class c) cell is one interval of cumulative mass. ``retarget`` moves
    a fraction ``locality`` of the targets into the source's community, with the same class
    choice (same class / other class) the pair already made, so homophily is kept."""

    def __init__(self, rng, y, theta, classes: int, communities: int, locality: float,
                 aligned: float = 0.0):
        n, C, K = len(y), classes, communities
        self.comm = rng.integers(0, K, n)
        if aligned > 0:  # drawn only then, so that aligned = 0 keeps the graphs made before it
            # class c's share: communities c, c + C, ... (K >= C) or community c mod K (K < C)
            follow = rng.random(n) < aligned
            mine = (y + C * rng.integers(0, max(1, K // C), n)) % K
            self.comm = np.where(follow, mine, self.comm)
        cell = self.comm * C + y
        self.order = np.argsort(cell, kind='stable')
        self.cum = np.cumsum(theta[self.order])
        self.c_lo, self.c_hi = _intervals(self.cum, np.cumsum(np.bincount(cell, minlength=K * C)))
        k_ends = np.cumsum(np.bincount(self.comm, minlength=K))
        self.k_lo, self.k_hi = _intervals(self.cum, k_ends)
        self.C, self.locality = C, locality

    def retarget(self, rng, src, c, inside, u, dst):
        k = self.comm[src]
        cell = k * self.C + c
        lo, mass = self.c_lo[cell], self.c_hi[cell] - self.c_lo[cell]
        k_mass = self.k_hi[k] - self.k_lo[k]
        # same class: inside the (k, c) cell; other class: community k without that cell
        local = _targets(self.cum, self.order, inside, u, lo, mass, self.k_lo[k], k_mass)
        # a community without other-class mass keeps the global target
        use = (rng.random(len(src)) < self.locality) & (inside | (k_mass - mass > 0))
        return np.where(use, local, dst)


def _targets(cum, order, inside, u, lo, mass, base, span):
    """Inverse-CDF draws from the cumulative mass ``cum`` of nodes in ``order``, one per ``u``:
    where ``inside``, uniform in [lo, lo + mass); elsewhere uniform in [base, base + span) with
    that interval skipped."""
    pos = np.where(inside, lo + u * mass, base + u * (span - mass))
    pos = np.where(~inside & (pos >= lo), pos + mass, pos)
    return order[np.minimum(np.searchsorted(cum, pos, side='right'), len(cum) - 1)]


def _intervals(cum, ends):
    """[lo, hi) of the cumulative mass of consecutive blocks ending (exclusive) at ``ends``."""
    hi = np.where(ends > 0, cum[np.maximum(ends - 1, 0)], 0.0)  # an empty block: empty interval
    return np.concatenate([[0.0], hi[:-1]]), hi


def drawn_options(recorded: dict) -> dict:
    """A generated graph's ``meta['options']`` with what ``make_synthetic`` leaves out of it at the
    defaults filled in (communities 1; with communities, aligned 0; split random), so that the
    options two graphs were drawn with compare key by key."""
    out = {'communities': 1, 'split': 'random', **recorded}
    if out['communities'] > 1:
        out.setdefault('aligned', 0.0)
    return out


def make_synthetic(nodes: int = 3000, classes: int = 8, avg_degree: float = 10.0,
                   features: int = 64, homophily: float = 0.8, seed: int = 0,
                   signal: float = 0.22, degree_exp: float = 2.5,
                   train: float = 0.6, val: float = 0.2, name: str | None = None,
                   communities: int = 1, locality: float = 0.9, aligned: float = 0.0,
                   split: str = 'random') -> Graph:
    """Generate a DC-SBM graph with class-dependent Gaussian features.

    Args:
        nodes: N, number of nodes (>= 2).
        classes: C, number of classes.
        communities: K >= 1 communities drawn independently of the classes (1: none, the
            default). Real graphs have locality: most edges stay inside small clusters, which a
            partitioner keeps together. With K = 1 every pair of a class is equally likely, so a
            partition of a large graph cuts many edges and its halos are large.
        locality: with K > 1, the fraction of edges whose target is drawn inside the source's
            community (same class or not, as homophily decides).
        aligned: with K > 1, the fraction of nodes whose community follows their class (class c:
            one of communities c, c + C, ... when K >= C; community c mod K when K < C); 0 (the
            default): communities independent of the classes. Aligned communities are nearly
            single-class, so the edges a partitioner cuts between them are mostly the
            heterophilous ones: the graph a partition-based method trains on is then more
            homophilous than the graph it is evaluated on.
        avg_degree: target mean degree of the final (symmetric, deduplicated) graph.
        features: F, feature dimension.
        homophily: fraction of edges joining two nodes of the same class (edge homophily).
        seed: every random draw derives from it; same seed => bit-identical tensors.
        signal: std of the class-mean vectors relative to unit noise. The default makes features
            alone weakly informative (an MLP ~55-70%) while neighbourhood averaging at h=0.8
            lifts a GCN well above it.
        degree_exp: tail exponent of the power-law degree propensity (> 1).
        train, val: split fractions; the rest is test.
        split: ``'random'`` (seeded, the default) or ``'popularity'``: the most connected nodes
            train and the least connected are test, as OGB splits ogbn-products by sales rank
            (``popularity_split``).
        name: Graph.name (defaults to "synthetic").

    Shapes: x ``[N, F]`` float32, y ``[N]`` int64, edge_index ``[2, E]`` int64 with E ~ N * d.
    """
    n, C = int(nodes), int(classes)
    rng = np.random.default_rng([int(seed), 0xD16E57])
    y = rng.integers(0, C, n)
    theta = _propensities(rng, n, degree_exp, avg_degree)

    # Order nodes by class so that each class is one contiguous block of cumulative mass.
    order = np.argsort(y, kind='stable')
    y_sorted = y[order]
    cum = np.cumsum(theta[order])
    total = float(cum[-1])
    counts = np.bincount(y, minlength=C)
    ends = np.cumsum(counts)
    lo, hi = _intervals(cum, ends)
    if C == 1:
        homophily = 1.0  # no other class to draw from
    K = int(communities)
    if K < 1 or not 0 <= locality <= 1 or not 0 <= aligned <= 1:
        raise ValueError('need communities >= 1, 0 <= locality <= 1 and 0 <= aligned <= 1, got '
                         f'{K}, {locality}, {aligned}')
    if split not in SPLITS:
        raise ValueError(f"split must be {' or '.join(map(repr, SPLITS))}, got {split!r}")
    # drawn only when K > 1, so that K = 1 reproduces the graphs made before the option existed
    local = _Communities(rng, y, theta, C, K, float(locality), float(aligned)) if K > 1 else None

    # canonical_edges stores both directions: N*d/2 undirected pairs give mean degree d. Self
    # loops and duplicates are lost, so top up (a few rounds) with pairs scaled by the yield.
    target = int(round(n * avg_degree))
    edge_index = torch.empty(2, 0, dtype=torch.long)
    want = target // 2
    for _ in range(4):
        chunks = [torch.from_numpy(_sample_pairs(rng, min(_CHUNK, want - s), cum, lo, hi, total,
                                                 y_sorted, order, homophily, local))
                  for s in range(0, want, _CHUNK)]
        half = edge_index[:, edge_index[0] < edge_index[1]]  # one direction of what we have
        before = edge_index.size(1)
        edge_index = canonical_edges(torch.cat([half] + chunks, dim=1), n)
        del half, chunks
        gained = edge_index.size(1) - before
        missing = target - edge_index.size(1)
        if missing <= 0 or gained <= 0:
            break
        # Scale by this round's yield, plus 5% so the last round lands just above the target.
        want = min(int(1.05 * missing / 2 * (2 * want / gained)) + 16, 2 * target)

    # Class means ~ N(0, signal^2 I), unit Gaussian noise; float32 throughout (2.4M x 100 = 1 GB).
    means = (rng.standard_normal((C, features)) * signal).astype(np.float32)
    x = rng.standard_normal((n, features), dtype=np.float32)
    x += means[y]
    y_t = torch.from_numpy(y.astype(np.int64))
    src, dst = edge_index
    # as many digits as the fractions have (8%/1.6%/90.4%), not rounded to whole percent
    fractions = '/'.join(f'{100 * f:.4g}%' for f in (train, val, 1 - train - val))
    if split == 'popularity':  # after the edges: the degree decides
        masks = popularity_split(degree(edge_index, n), train, val)
        how = f'popularity {fractions} (by degree, most connected first)'
    else:
        masks, how = random_split(n, seed, train, val), f'random {fractions} (seed={seed})'
    train_mask, val_mask, test_mask = masks
    measured = float((y_t[src] == y_t[dst]).float().mean()) if src.numel() else float('nan')
    extra = {}
    if local is not None:
        comm = torch.from_numpy(local.comm)
        extra['locality_measured'] = float((comm[src] == comm[dst]).float().mean()) \
            if src.numel() else float('nan')
    opts = dict(nodes=n, classes=C, avg_degree=avg_degree, features=features,
                homophily=homophily, seed=seed, signal=signal, degree_exp=degree_exp,
                **({'communities': K, 'locality': locality} if K > 1 else {}),
                **({'aligned': aligned} if K > 1 and aligned > 0 else {}),
                **({'split': split} if split != 'random' else {}))
    meta = {'source': 'synthetic DC-SBM (digest.data.synthetic.make_synthetic)',
            'split': how,
            'options': opts, 'homophily_measured': measured,
            'avg_degree_measured': edge_index.size(1) / n, **extra}
    return Graph(name=name or 'synthetic', x=torch.from_numpy(x), y=y_t, edge_index=edge_index,
                 train_mask=train_mask, val_mask=val_mask, test_mask=test_mask,
                 num_classes=C, meta=meta)
