"""PipeGCN's update rule (docs/methods.md 8.1), checked against an independent single-process
computation: 2 real gloo workers train a 3-layer GCN for a few steps; this process
rebuilds the whole graph from their part files and, for the parameters the workers held before
each step, computes the gradient that PipeGCN's rule prescribes:

- forward at step t on worker m: layer l reads its own rows of step t for V_m and, for its halo
  H_m, the rows their owners computed at step t - 1 (at step 0: an exact forward pass);
- backward at step t: the gradient of worker m's loss reaches the halo rows it read (they are
  constants for the parameters) and is sent to their owners, who add it, summed over the workers
  that read a row, to the gradient of their own rows of layer l at step t + 1 (none at step 0);
- the parameter gradient is the sum over workers (the all-reduce; each loss is divided by the
  global number of training nodes).

In one process that rule is the gradient of a surrogate, S_t = sum_m [L_m(rows of t, stale halo)
+ sum_l <G_l, own rows of layer l at t>] with G_l the halo gradients of step t - 1, written here in
float64 with a dense normalised adjacency: no code of the trainer, the models or the halo policies
is used. Dropout 0, so every step is deterministic.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from digest.config import TrainConfig, validate
from digest.data.cache import load_part, prepare_partition
from digest.data.synthetic import make_synthetic
from digest.training.trainer import Trainer
from helpers import run_workers

STEPS, L, M = 5, 3, 2
BASE = TrainConfig.of(dataset="pipe-update", hidden=8, layers=L, dropout=0.0, epochs=STEPS,
                      progress=False)


def record(cfg, rt, part, runs):
    """Per run and step: the parameters before the step and the (all-reduced) gradients."""
    torch.set_num_threads(1)
    out = {}
    for name, over in runs.items():
        run_cfg = cfg.replace(**over)
        validate(run_cfg)
        trainer = Trainer(run_cfg, rt, part)
        steps = []
        for t in range(STEPS):
            before = {k: p.detach().clone() for k, p in trainer.model.named_parameters()}
            trainer.step(t)
            grads = {k: p.grad.detach().clone() for k, p in trainer.model.named_parameters()}
            steps.append((before, grads))
        out[name] = steps
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    graph = make_synthetic(nodes=240, classes=4, avg_degree=6, features=10, seed=5)
    part_dir = prepare_partition("pipe-update", M, "metis", 0, tmp_path_factory.mktemp("data"),
                                 graph=graph)
    parts = [load_part(part_dir, r) for r in range(M)]
    ranks = run_workers(record, BASE, part_dir, M,
                        runs={"pipegcn": dict(method="pipegcn"), "exact": dict(method="exact")})
    return Whole(parts), ranks


class Whole:
    """The full graph rebuilt from the workers' parts (global ids), in float64."""

    def __init__(self, parts):
        self.n = sum(p.n_inner for p in parts)
        feats = parts[0].x.size(1)
        self.x = torch.zeros(self.n, feats, dtype=torch.float64)
        self.y = torch.zeros(self.n, dtype=torch.long)
        self.train = torch.zeros(self.n, dtype=torch.bool)
        self.owner = torch.full((self.n,), -1, dtype=torch.long)
        self.adj = torch.zeros(self.n, self.n, dtype=torch.float64)
        self.n_train = parts[0].num_train_global
        for p in parts:
            gid = p.global_ids
            inner = gid[:p.n_inner]
            x = p.x.to_dense() if p.x.is_sparse else p.x
            self.x[inner] = x[:p.n_inner].double()
            self.y[inner], self.train[inner] = p.y, p.train_mask
            self.owner[inner] = p.rank
            deg = p.deg.double() + 1  # global degree + the self-loop
            src, dst = p.edge_index
            self.adj[gid[dst], gid[src]] = (deg[src] * deg[dst]).rsqrt()
            self.adj[inner, inner] = 1.0 / deg[:p.n_inner]
        assert bool((self.owner >= 0).all()) and self.n_train == int(self.train.sum())

    def layer(self, P, l, h):
        """Layer l on full-size input rows ``h [n, F]`` (only the rows a worker reads matter)."""
        out = self.adj @ (h @ P[f"convs.{l}.lin.weight"].t()) + P[f"convs.{l}.bias"]
        return out.relu() if l < L - 1 else out

    def exact_rows(self, P):
        """Every layer's rows of the full graph: h^0 = X, ..., h^L = logits."""
        rows = [self.x]
        for l in range(L):
            rows.append(self.layer(P, l, rows[-1]))
        return rows

    def exact_grad(self, P):
        P = {k: v.detach().requires_grad_() for k, v in P.items()}
        logits = self.exact_rows(P)[-1]
        loss = F.cross_entropy(logits[self.train], self.y[self.train], reduction="sum")
        loss = loss / self.n_train
        return dict(zip(P, torch.autograd.grad(loss, list(P.values()))))

    def pipe_step(self, P, stale, G):
        """PipeGCN's step from ``stale[l]`` (rows every owner computed at the step before, l >= 1)
        and ``G[l]`` (the halo gradients sent at the step before, summed per owner row; None at
        step 0). Returns (parameter gradient, this step's rows, this step's halo gradients)."""
        P = {k: v.detach().requires_grad_() for k, v in P.items()}
        leaves, total = [], 0.0
        rows = {l: torch.zeros_like(stale[l]) for l in stale}
        for m in range(M):
            mine = (self.owner == m).unsqueeze(1)
            halo = {l: stale[l].clone().requires_grad_() for l in stale}  # constants for P
            leaves.append(halo)
            h = self.x
            for l in range(L):
                inp = h if l == 0 else torch.where(mine, h, halo[l])
                h = torch.where(mine, self.layer(P, l, inp), torch.zeros(()))
                if l + 1 < L:
                    rows[l + 1] = rows[l + 1] + h.detach()
                    if G is not None:  # last step's halo gradient, added to my own rows
                        total = total + (torch.where(mine, G[l + 1], torch.zeros(())) * h).sum()
            train = self.train & mine.squeeze(1)
            total = total + F.cross_entropy(h[train], self.y[train], reduction="sum") / self.n_train
        total.backward()
        grads = {k: v.grad for k, v in P.items()}
        sent = {l: sum(leaves[m][l].grad for m in range(M)) for l in stale}
        return grads, rows, sent


def close(a, b, rtol=1e-4):
    return float((a.double() - b).norm()) <= rtol * float(b.norm()) + 1e-9


def test_pipegcn_gradient_is_its_update_rule(world):
    whole, ranks = world
    steps = ranks[0]["pipegcn"]
    for r in ranks[1:]:  # the all-reduce leaves the same gradient on every worker
        assert all(torch.equal(a[1][k], b[1][k]) for a, b in zip(steps, r["pipegcn"]) for k in a[1])
    P0 = {k: v.double() for k, v in steps[0][0].items()}
    exact = whole.exact_rows(P0)
    stale = {l: exact[l] for l in range(1, L)}  # step 0 reads an exact forward pass
    G = None
    for t, (before, got) in enumerate(steps):
        P = {k: v.double() for k, v in before.items()}
        want, rows, sent = whole.pipe_step(P, stale, G)
        for k in want:
            assert close(got[k], want[k]), (t, k)
        if t >= 1:  # stale rows and gradients matter: the exact gradient at P is another one
            ex = whole.exact_grad(P)
            assert not all(close(got[k], ex[k], 1e-3) for k in want), t
        stale, G = rows, sent
    assert t == STEPS - 1


def test_exact_gradient_is_the_full_graph_gradient(world):
    """The reference itself, checked on the exact method: the same whole graph and layer code
    give the workers' exact gradients at every step."""
    whole, ranks = world
    for t, (before, got) in enumerate(ranks[0]["exact"]):
        want = whole.exact_grad({k: v.double() for k, v in before.items()})
        for k in want:
            assert close(got[k], want[k]), (t, k)
