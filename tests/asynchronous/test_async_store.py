"""DIGEST-A's worker side without processes (digest/asynchronous/client.py): the server epochs
whose snapshots are kept, and the halo store a worker pulls from the server, driven step by step
with a fake client on a real ParameterServer."""
from __future__ import annotations

import torch

from digest.asynchronous import snapshot_epochs
from digest.config import TrainConfig
from digest.data.cache import prepare_partition
from digest.data.synthetic import make_synthetic


def _graph():
    return make_synthetic(nodes=400, seed=1)  # its defaults: 8 classes


def test_snapshot_epochs_keep_the_last_and_are_capped():
    assert snapshot_epochs(10, 1) == list(range(1, 11))
    assert snapshot_epochs(10, 4) == [4, 8, 10]
    eps = snapshot_epochs(1000, 1, cap=50)
    assert len(eps) == 50 and eps[0] == 1 and eps[-1] == 1000 and eps == sorted(set(eps))


# -- the worker-side store, with a fake client on a real ParameterServer (no processes) ---------------
class _Client:
    """What AsyncStaleHalo uses of AsyncClient, calling the server object directly (no rpc)."""

    def __init__(self, srv, rank, world, steps):
        self.srv, self.rank, self.world = srv, rank, world
        self.steps, self.done = steps, False  # every worker's applied steps (shared here)
        self.applied = True  # every step's gradient is applied (no hold, budget not spent)

    def push_rows(self, tag, rows, counts):
        self.srv.push_rows(self.rank, tag, rows, list(counts))

    def pull_rows(self, known):
        return self.srv.pull_rows(self.rank, list(known))


def _inner(rank, step, layer, n, width):
    """Rows worker ``rank``'s forward "computes" at ``step`` (-1: the fill) for hidden ``layer``:
    distinct per worker, step, layer and row."""
    base = 1000.0 * (step + 2) + 100.0 * rank + 10.0 * layer
    return base + torch.arange(n * width, dtype=torch.float32).view(n, width) / (n * width)


def test_worker_pull_refreshes_the_store_with_interval_one(tmp_path, monkeypatch):
    """Two DIGEST-A workers, simulated in one process on one ParameterServer, --sync-interval 1:
    after the start-up seed, each step's push must reach the other worker at its next pull, and
    the pulled rows must become exactly the halo rows the next step reads (per layer). The bug this
    guards against: the push after step 0 carried the seed's tag 0 and the server served only tags > 0,
    so that refresh was never pulled (worker 1 kept the fill's rows); a worker that ignored its
    pulls would fail the same checks."""
    import digest.policies.store
    from digest.asynchronous import AsyncStaleHalo
    from digest.data.cache import load_part
    from digest.policies.halo import HaloPlan
    from digest.models import MODELS
    from digest.asynchronous.server import ParameterServer

    world, hidden = 2, 4
    part_dir = prepare_partition("pull2", world, "metis", 0, tmp_path, graph=_graph())
    parts = [load_part(part_dir, r) for r in range(world)]
    assert all(sum(p.recv_counts) > 0 for p in parts)  # both have a halo
    model = MODELS["gcn"](parts[0].x.size(1), hidden, 8, 3, 0.0)
    srv = ParameterServer(model.parameters(), 0.1, 0.0, world, budget=100)
    cfg = TrainConfig.of(method="digest-async", sync_interval=1, hidden=hidden)
    steps = [0] * world
    clients = [_Client(srv, r, world, steps) for r in range(world)]
    policies = [AsyncStaleHalo(p, HaloPlan.of(p), model, cfg, c) for p, c in zip(parts, clients)]

    def halo_of(dest, step, layer):  # dest's halo rows, by owner, from the owners' rows of step
        p = parts[dest]
        return torch.cat([_inner(o, step, layer, parts[o].n_inner, hidden)[parts[o].send_idx[dest]]
                          for o in range(world) if o != dest and p.recv_counts[o]])

    fill_of = {}  # the fill's exchange (a collective in a real run): the owners' rows at step -1
    monkeypatch.setattr(digest.policies.store, "exchange", lambda h, plan, cat: fill_of[(id(plan), h.size(1))])

    def forward(r, step):
        def run(halo_fn):
            for layer in (1, 2):
                halo_fn(layer, _inner(r, step, layer, parts[r].n_inner, hidden))
        return run

    for r, pol in enumerate(policies):  # start-up: fill (exact halos of step -1), seed the server
        for layer in (1, 2):  # the fill exchanges layer by layer; both widths are `hidden` here
            fill_of[(id(pol.plan), hidden)] = halo_of(r, -1, layer)
            pol._fill(lambda halo_fn, r=r, layer=layer: halo_fn(
                layer, _inner(r, -1, layer, parts[r].n_inner, hidden)))
    for r, pol in enumerate(policies):  # the real start-up path, with the store already filled
        pol.started = False
        monkeypatch.setattr(pol, "_fill", lambda forward: None)
        pol.before_step(0, None)
        for layer in (1, 2):
            assert torch.equal(pol.store[layer], halo_of(r, -1, layer))

    def step(r, t):  # worker r's step t: forward (reads the store), gradient applied, sync
        pol = policies[r]
        used = {layer: pol.halo(layer, _inner(r, t, layer, parts[r].n_inner, hidden))
                for layer in (1, 2)}
        steps[r] += 1  # the server applied its gradient (the reply carries every worker's count)
        pol.after_step(t)
        return used

    # worker 0 steps first: nothing new from worker 1 yet (only its seed); worker 1 then pulls
    # worker 0's step-0 rows, which its step 1 reads
    step(0, 0)
    assert torch.equal(policies[0].store[1], halo_of(0, -1, 1))
    step(1, 0)
    for layer in (1, 2):
        assert torch.equal(policies[1].store[layer], halo_of(1, 0, layer)), layer
    used = step(1, 1)
    for layer in (1, 2):
        assert torch.equal(used[layer], halo_of(1, 0, layer)), layer
    # worker 0's next step reads worker 1's step-1 rows, the newest pushed (two pushes since the
    # seed; the pull takes the latest only)
    used = step(0, 1)  # reads what worker 0 pulled after step 0 (still the fill)
    assert torch.equal(used[1], halo_of(0, -1, 1))
    assert policies[0].tags[1] == 1 and policies[0].seqs[1] == 3  # seed, step 0, step 1
    used = step(0, 2)
    for layer in (1, 2):
        assert torch.equal(used[layer], halo_of(0, 1, layer)), layer
    # staleness in the owners' steps: worker 0's step 2 read rows worker 1 computed with 1 step
    # done, and worker 1 had completed 2 steps as of worker 0's push
    assert policies[0].age == 2 - 1
    # nothing new: a pull changes nothing
    before = policies[0].store[1].clone()
    policies[0].pull()
    assert torch.equal(policies[0].store[1], before)


