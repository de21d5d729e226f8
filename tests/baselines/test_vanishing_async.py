"""DIGEST-A with vanishing staleness (baselines/vanishing_async.py): each worker's push steps follow
its schedule: fixed is DIGEST-A's, decreasing falls with the server's budget (a straggler's too),
drift pushes on its own rows' drift (TAU = 0: every step). One worker's policy is driven step by
step with a fake client (no processes), then one real 2-worker run."""
from __future__ import annotations

import pytest
import torch

import digest.policies.store
from baselines.vanishing_async import AsyncVanishingHalo
from digest.asynchronous import AsyncStaleHalo
from digest.data.cache import load_part, prepare_partition
from digest.config import TrainConfig
from digest.policies.halo import HaloPlan
from digest.models import MODELS
from digest.data.synthetic import make_synthetic
from helpers import run_workers

HIDDEN = 4


class _Client:
    """What the policy reads of AsyncClient: the server's version after this worker's gradient
    (set by the driver), the budget; pushes are recorded by tag, pulls bring nothing new."""

    def __init__(self, budget):
        self.world, self.budget, self.version = 2, budget, 0
        self.steps, self.applied, self.done = [0, 0], True, False
        self.tags = []

    def push_rows(self, tag, rows, counts):
        self.tags.append(tag)

    def pull_rows(self, known):
        return [None] * self.world


@pytest.fixture(scope="module")
def part(tmp_path_factory):
    graph = make_synthetic(nodes=300, classes=4, avg_degree=8, features=12, seed=5)
    part_dir = prepare_partition("vana", 2, "metis", 0, tmp_path_factory.mktemp("d"), graph=graph)
    return load_part(part_dir, 0)


def push_steps(part, monkeypatch, versions, budget, rows=None, cls=AsyncVanishingHalo, **flags):
    """Worker 0's steps 0, 1, ... with the server at ``versions[t]`` after step t's gradient;
    ``rows(t)``: the scale of its hidden rows at step t (default: new rows every step). Returns
    the steps after which it pushed (the start-up seed not counted)."""
    rows = rows or (lambda t: 2.0 + t)
    monkeypatch.setattr(digest.policies.store, "exchange",  # the fill's collective: zero halo rows
                        lambda h, plan, cat: torch.zeros(sum(plan.recv_counts), h.size(1)))
    model = MODELS["gcn"](part.x.size(1), HIDDEN, 4, 3, 0.0)
    client = _Client(budget)
    cfg = TrainConfig.of(method="digest-async-vanishing", hidden=HIDDEN, **flags)
    pol = cls(part, HaloPlan.of(part), model, cfg, client)

    def inner(t, layer):
        return rows(t) * (1.0 + torch.arange(part.n_inner * HIDDEN).view(-1, HIDDEN) * layer)

    pol.before_step(0, lambda halo_fn: [halo_fn(l, inner(-1, l)) for l in (1, 2)])
    assert client.tags == [0]  # the seed: the fill's rows, before step 0
    for t, v in enumerate(versions):
        pol.before_step(t, None)
        for layer in (1, 2):
            assert torch.equal(pol.halo(layer, inner(t, layer)), pol.store[layer])
        client.version = v
        pol.after_step(t)
    return client.tags[1:]


def test_fixed_is_digest_a(part, monkeypatch):
    versions = [2 * t + 1 for t in range(12)]
    got = push_steps(part, monkeypatch, versions, 24, sync_interval=4, sync_schedule="fixed")
    ref = push_steps(part, monkeypatch, versions, 24, cls=AsyncStaleHalo, sync_interval=4)
    assert got == ref == [3, 7, 11]


def test_decreasing_falls_with_the_budget(part, monkeypatch):
    # in lockstep with another worker: progress (2t) / 23; I = ceil(4 - 3 progress)
    # = 4 4 4 4 | 3 3 3 | 3 2 | 2 2 | 2
    lockstep = push_steps(part, monkeypatch, [2 * t + 1 for t in range(12)], 24,
                          sync_interval=4, sync_schedule="decreasing")
    assert lockstep == [3, 6, 8, 10]
    # a straggler at half that pace: its own 6 steps cover the same budget, and its interval
    # falls as fast as everyone's (by its own step count it would still be 4 at step 3)
    straggler = push_steps(part, monkeypatch, [4 * t + 3 for t in range(6)], 24,
                           sync_interval=4, sync_schedule="decreasing")
    assert straggler == [2, 4]


def test_drift_pushes_on_its_own_drift(part, monkeypatch):
    every = push_steps(part, monkeypatch, list(range(1, 9)), 16, sync_interval=4,
                       sync_schedule="drift", drift_threshold=0.0)
    assert every == list(range(8))
    # rows constant but for a jump at step 5: pushed at the bound I = 4 and at the jump
    jump = push_steps(part, monkeypatch, list(range(1, 11)), 20, rows=lambda t: 3.0 if t >= 5 else 1.0,
                      sync_interval=4, sync_schedule="drift", drift_threshold=0.5)
    assert jump == [3, 5, 9]


@pytest.mark.slow  # two workers and a server process over rpc
def test_two_real_workers_with_tau_zero_push_after_every_applied_step(tmp_path):
    """And the bytes are the hand-derived count: the drift decision costs none (each worker
    decides alone), every sync is a push of the boundary rows and a pull of the newer blocks."""
    import pandas as pd

    from helpers import async_bytes_by_hand, fit_async_counted
    graph = make_synthetic(nodes=300, classes=4, avg_degree=8, features=12, seed=5)
    part_dir = prepare_partition("vanr", 2, "metis", 0, tmp_path, graph=graph)
    cfg = TrainConfig.of(dataset="vanr", method="digest-async-vanishing", hidden=8, epochs=6,
                         sync_interval=4, sync_schedule="drift", drift_threshold=0.0,
                         progress=False, timeout=60)
    workers = run_workers(fit_async_counted, cfg, part_dir, 2, out_dir=str(tmp_path / "run"))
    m = pd.read_csv(tmp_path / "run" / "metrics.csv")
    # 12 gradients applied; every step syncs but the one that spent the budget (nobody reads it)
    assert len(m) == 6 and int(m["store_syncs"].iloc[-1]) == 2 * 6 - 1
    assert m["drift"].notna().all()
    keys = ("bytes_params", "bytes_store", "bytes_halo_fwd", "messages")
    for w in workers:
        assert [{k: s[k] for k in keys} for s in w["steps"]] == async_bytes_by_hand(w, 2 * 8)
    for key in keys:
        assert int(m[key].sum()) == sum(s[key] for w in workers for s in w["steps"])
