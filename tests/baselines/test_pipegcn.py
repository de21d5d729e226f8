"""PipeGCN (docs/methods.md section 8.1) in 3 real worker processes: the halo rows of step t are the
owners' rows of step t-1 and the boundary gradients added at step t+1 are the receivers' halo
gradients of step t, row for row; smoothing; bytes. (Resume, in-flight rows and gradients
included: test_resume.py; SAGE and GAT: test_bnsgcn.py.)

All in-process configurations run in ONE launch (worker start-up dominates the cost)."""
from __future__ import annotations

import torch

from digest.config import TrainConfig
from helpers import train_runs

STEPS = 6
BASE = TrainConfig.of(dataset="pipe", hidden=8, layers=3, dropout=0.0, epochs=STEPS, progress=False)
RUNS = {
    "pipe": dict(method="pipegcn"),
    "smooth": dict(method="pipegcn", pipe_smoothing=0.5),
    "exact": dict(method="exact"),
    # parameters (almost) frozen: stale rows and gradients equal fresh ones, so from step 1 on
    # PipeGCN's parameter gradients must be exact's
    "frozen_pipe": dict(method="pipegcn", lr=1e-12, epochs=3),
    "frozen_exact": dict(method="exact", lr=1e-12, epochs=3),
}
KEYS = ("used", "latest", "added", "sent")


def per_step(trainer, epoch, ctx) -> dict:
    policy = trainer.policy
    rec = {"grads": [p.grad.clone() for p in trainer.model.parameters()]}
    for key in KEYS:
        if hasattr(policy, key):
            rec[key] = {l: v.detach().clone() for l, v in getattr(policy, key).items()}
    return rec


def record(cfg, rt, part, runs):
    out = train_runs(cfg, rt, part, runs, per_step=per_step)
    out.update(ids=part.global_ids.clone(), n_inner=part.n_inner,
               send_idx=[s.clone() for s in part.send_idx])
    return out


# the one launch of this module's `world` fixture (tests/conftest.py)
WORLD = dict(fn=record, cfg=BASE, workers=3, graph=dict(seed=3), runs=RUNS)


def owners_rows(graph, ranks, run, t, layer):
    """Global ``[N, F]`` rows of ``layer`` that their owners computed at step ``t``."""
    full = None
    for r in ranks:
        rows = r[run][t]["latest"][layer]
        if full is None:
            full = torch.zeros(graph.num_nodes, rows.size(1))
        full[r["ids"][: r["n_inner"]]] = rows
    return full


def received_grads(ranks, run, t, layer, m):
    """What owner ``m`` should receive for ``layer`` from step ``t``: ``[S, F]`` in its send order,
    each row the halo gradient its peer computed for that node at step t."""
    owner = ranks[m]
    blocks = []
    for j, idx in enumerate(owner["send_idx"]):
        peer = ranks[j]
        halo_ids = peer["ids"][peer["n_inner"]:].tolist()
        where = {g: i for i, g in enumerate(halo_ids)}
        sent = peer[run][t]["sent"][layer] if idx.numel() else None
        rows = [sent[where[g]] for g in owner["ids"][idx].tolist()]
        blocks.append(torch.stack(rows) if rows else torch.zeros(0, BASE.model.hidden))
    return torch.cat(blocks)


def test_halo_rows_are_the_owners_rows_of_the_previous_step(world):
    graph, ranks = world.graph, world.ranks
    for t in range(1, STEPS):
        for layer in (1, 2):
            full = owners_rows(graph, ranks, "pipe", t - 1, layer)
            for r in ranks:
                assert torch.equal(r["pipe"][t]["used"][layer], full[r["ids"][r["n_inner"]:]]), \
                    (t, layer)
    assert [ranks[0]["pipe"][t]["staleness_repr"] for t in range(STEPS)] == [0] + [1] * (STEPS - 1)
    # step 0 reads the exact fill: its loss is exact's
    loss0 = [sum(r[run][0]["loss"] for r in ranks) for run in ("pipe", "exact")]
    assert abs(loss0[0] - loss0[1]) < 1e-6


def test_boundary_gradients_added_are_those_of_the_previous_step(world):
    ranks = world.ranks
    for m, r in enumerate(ranks):
        assert r["pipe"][0]["added"] == {}  # step 0: no incoming gradient
        for t in range(1, STEPS):
            for layer in (1, 2):
                expected = received_grads(ranks, "pipe", t - 1, layer, m)
                assert torch.equal(r["pipe"][t]["added"][layer], expected), (m, t, layer)
                assert expected.abs().sum() > 0


def test_with_frozen_parameters_the_gradients_are_exact(world):
    """Stale by one step = fresh when nothing moves: then the rows AND the gradients added must
    make PipeGCN's parameter gradients the full-graph ones. With L = 3 that holds from step 2 on:
    the layer-1 halo gradient sent at step 0 was computed before the layer-2 gradient of step 0
    had arrived, so at step 1 only the layer-0 parameters still differ (and at step 0, which has
    no incoming gradient, more of them)."""
    ranks = world.ranks
    close = [[torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in
              zip(ranks[0]["frozen_pipe"][t]["grads"], ranks[0]["frozen_exact"][t]["grads"])]
             for t in range(3)]
    assert all(close[2])
    assert not all(close[0]) and not all(close[1])
    # step 1: the parameters of layers 1 and 2 (everything after convs.0) are already exact
    assert all(close[1][2:]) and not all(close[1][:2])


def test_smoothing(world):
    """GAMMA = 0 (the default, above) gives the raw rows exactly; GAMMA = 0.5 the exponential
    average, started from the first rows received, for features and gradients separately."""
    graph, ranks = world.graph, world.ranks
    g = 0.5
    for m, r in enumerate(ranks):
        halo = r["ids"][r["n_inner"]:]
        steps = r["smooth"]
        for t in range(1, STEPS):
            for layer in (1, 2):
                fresh = owners_rows(graph, ranks, "smooth", t - 1, layer)[halo]
                assert torch.allclose(steps[t]["used"][layer],
                                      steps[t - 1]["used"][layer] * g + fresh * (1 - g), atol=1e-6)
                got = received_grads(ranks, "smooth", t - 1, layer, m)
                want = got if t == 1 else steps[t - 1]["added"][layer] * g + got * (1 - g)
                assert torch.allclose(steps[t]["added"][layer], want, atol=1e-7)
    # and it changes training
    assert sum(r["smooth"][-1]["loss"] for r in ranks) != sum(r["pipe"][-1]["loss"] for r in ranks)


def test_bytes_per_step_equal_exact(world):
    ranks = world.ranks

    def per_step(run, key):
        return [sum(r[run][t][key] for r in ranks) for t in range(STEPS)]
    for key in ("bytes_halo_fwd", "bytes_halo_bwd"):
        assert per_step("pipe", key)[1:] == per_step("exact", key)[1:], key
    assert per_step("pipe", "bytes_halo_bwd")[0] == per_step("exact", "bytes_halo_bwd")[0]
    # step 0 also counts the exact fill: one more forward exchange of the hidden rows (exact's
    # step 1; its step 0 holds the input features too, fetched once)
    exact_fwd = per_step("exact", "bytes_halo_fwd")
    assert per_step("pipe", "bytes_halo_fwd")[0] == exact_fwd[0] + exact_fwd[1]
    # what the step waited for: nothing at step 0 (its halo is the exact fill, no exchange in
    # flight), then its two layers' rows and gradients of the step before, four exchanges, each
    # either finished already or waited for (pipe_ready: the fraction finished)
    for r in ranks:
        states = r["pipe"]
        assert states[0]["pipe_ready"] is None and states[0]["comm_wait"] == 0.0
        for s in states[1:-1]:
            assert s["pipe_ready"] * 4 in (0, 1, 2, 3, 4), s["pipe_ready"]
