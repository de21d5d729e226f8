"""BNS-GCN (docs/methods.md section 8.2) in 2 real worker processes, plus every model under PipeGCN
and BNS-GCN: p = 1 is exact (losses over 20 epochs, GCN, SAGE and GAT); at p < 1 the rows a
receiver gets are its owners' rows of the same step, sampled by the rule of the shared seed and
rescaled, and the loss and parameter gradients of a step are those of an independent
single-process computation on the whole graph with that step's sample (GCN, SAGE: scaled rows;
GAT: unsampled rows' edges left out); bytes count only the sampled rows. (Resume:
test_resume.py.)

All in-process configurations run in ONE launch (worker start-up dominates the cost)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from digest.config import TrainConfig
from helpers import total, train_runs

H = 8
BASE = TrainConfig.of(dataset="bns", hidden=H, layers=3, dropout=0.0, epochs=20, progress=False)
RUNS = {
    **{f"exact_{m}": dict(method="exact", model=m) for m in ("gcn", "sage", "gat")},
    **{f"p1_{m}": dict(method="bnsgcn", model=m, boundary_rate=1.0)
       for m in ("gcn", "sage", "gat")},
    "p05": dict(method="bnsgcn", boundary_rate=0.5, epochs=3),
    "p01": dict(method="bnsgcn", epochs=2),  # the default p = 0.1
    "p0": dict(method="bnsgcn", boundary_rate=0.0, epochs=2),
    "p05_sage": dict(method="bnsgcn", model="sage", boundary_rate=0.5, epochs=2),
    "p05_gat": dict(method="bnsgcn", model="gat", boundary_rate=0.5, epochs=2),
    "pipe_sage": dict(method="pipegcn", model="sage", epochs=3),
    "pipe_gat": dict(method="pipegcn", model="gat", epochs=3),
}


def spy(trainer) -> dict:
    """Record, per step, each exchanged layer's (inner rows, halo rows returned, sampled halo
    positions), the edges each hidden GAT layer reads, and the parameters (so the parameters a
    step started from are known)."""
    policy, ctx = trainer.policy, {"seen": {}, "edges": [],
                                   "start": [p.detach().clone() for p in trainer.model.parameters()]}
    if trainer.cfg.method == "bnsgcn":
        halo = policy.halo

        def recorded(layer, h):
            rows = halo(layer, h)
            ctx["seen"][layer] = (h.detach().clone(), rows.detach().clone(),
                                  None if policy.recv_sel is None else policy.recv_sel.clone())
            return rows
        policy.halo = recorded  # the trainer reads policy.halo at every step
    if trainer.cfg.model.model == "gat":  # registered after the policy's hook: sees its edges
        for layer in range(1, len(trainer.model.convs)):
            trainer.model.convs[layer].register_forward_pre_hook(
                lambda mod, args, layer=layer: ctx["edges"].append(
                    (layer, trainer.model.training, args[1].clone())))
    return ctx


def per_step(trainer, epoch, ctx) -> dict:
    out = {"seen": dict(ctx["seen"]), "edges": list(ctx["edges"]),
           "grads": [p.grad.clone() for p in trainer.model.parameters()],
           "params": [p.detach().clone() for p in trainer.model.parameters()]}
    ctx["seen"].clear()
    ctx["edges"].clear()
    return out


def finish(trainer, ctx) -> dict:
    trainer.evaluate()
    return {"eval_edges": [(l, t, e.size(1)) for l, t, e in ctx["edges"]],
            "start": ctx["start"], "names": [k for k, _ in trainer.model.named_parameters()]}


def record(cfg, rt, part, runs):
    out = train_runs(cfg, rt, part, runs, setup=spy, per_step=per_step, finish=finish)
    out.update(ids=part.global_ids.clone(), n_inner=part.n_inner,
               recv_counts=list(part.recv_counts))
    return out


# the one launch of this module's `world` fixture (tests/conftest.py)
WORLD = dict(fn=record, cfg=BASE, workers=2, graph=dict(seed=5), runs=RUNS)


@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
def test_rate_one_equals_exact(world, model):
    ranks = world.ranks
    exact, p1 = total(ranks, f"exact_{model}", "loss"), total(ranks, f"p1_{model}", "loss")
    assert len(p1) == 20 and max(abs(a - b) for a, b in zip(exact, p1)) < 1e-4
    assert exact[-1] < exact[0]
    for key in ("bytes_halo_fwd", "bytes_halo_bwd", "messages"):
        assert total(ranks, f"p1_{model}", key) == total(ranks, f"exact_{model}", key), key
    assert ranks[0][f"p1_{model}"][0]["sampled_fraction"] == 1.0


def expected_sample(seed, step, owner, peer, total_rows, k) -> list[int]:
    """The documented rule, restated: k of range(total) uniformly without replacement, from a
    generator seeded by (seed, step, owner, peer), sorted."""
    if k <= 0:
        return []
    key = np.random.SeedSequence([seed % 2**32, step, owner, peer]).generate_state(1)[0]
    perm = torch.randperm(total_rows, generator=torch.Generator().manual_seed(int(key)))
    return sorted(perm[:k].tolist())


def test_receivers_get_their_owners_rows_sampled_and_rescaled(world):
    graph, ranks = world.graph, world.ranks
    p = 0.5
    for t in range(3):
        for layer in (1, 2):
            full = torch.zeros(graph.num_nodes, H)  # owners' rows of this step, by global id
            for r in ranks:
                full[r["ids"][: r["n_inner"]]] = r["p05"][t]["seen"][layer][0]
            for me, r in enumerate(ranks):
                _, halo, sel = r["p05"][t]["seen"][layer]
                ids = r["ids"][r["n_inner"]:]
                start, want, rule = 0, torch.zeros_like(halo), []
                for owner, c in enumerate(r["recv_counts"]):  # floor(p c) rows, scaled c / k
                    k = math.floor(p * c)
                    rule += [start + i for i in expected_sample(0, t, owner, me, c, k)]
                    mine = sel[(sel >= start) & (sel < start + c)]
                    assert mine.numel() == k
                    if k:
                        want[mine] = full[ids[mine]] * (c / k)
                    start += c
                assert sel.tolist() == rule, (t, layer)  # the shared seed's sample, this step's
                assert torch.allclose(halo, want, atol=1e-6), (t, layer)
    # resampled every step
    sels = [ranks[0]["p05"][t]["seen"][1][2].tolist() for t in range(3)]
    assert sels[0] != sels[1] and sels[1] != sels[2] and sels[0] != sels[2]


def reference_step(graph, ranks, run, t, p, model_name):
    """The loss and parameter gradients of BNS-GCN's step ``t`` computed in one process on the
    whole graph, from the parameters the step started with and the halo positions each worker
    received: the edge j -> i, i owned by worker m, is kept with factor 1 when j is m's own, with
    factor c / floor(p c) (c = the rows m receives from j's owner) when m received j's row this
    step, and dropped when it did not (GAT: kept with factor 1 / dropped). Layer 0 reads every
    input row."""
    from torch_geometric.nn import GATConv, GCNConv

    n = graph.num_nodes
    owner = torch.empty(n, dtype=torch.long)
    for m, r in enumerate(ranks):
        owner[r["ids"][: r["n_inner"]]] = m
    factor = {}  # (worker, global id of a halo row) -> its factor this step
    for m, r in enumerate(ranks):
        sel, ids, start = set(r[run][t]["seen"][1][2].tolist()), r["ids"][r["n_inner"]:], 0
        for c in r["recv_counts"]:
            k = math.floor(p * c)
            for pos in range(start, start + c):
                factor[m, int(ids[pos])] = (1.0 if model_name == "gat" else c / k) \
                    if pos in sel else 0.0
            start += c
    src, dst = graph.edge_index
    s = torch.tensor([1.0 if owner[j] == owner[i] else factor[int(owner[i]), int(j)]
                      for j, i in zip(src.tolist(), dst.tolist())])
    names = ranks[0]["end"][run]["names"]
    params = ranks[0][run][t - 1]["params"] if t else ranks[0]["end"][run]["start"]
    params = {k: q.clone().requires_grad_() for k, q in zip(names, params)}
    deg = torch.bincount(dst, minlength=n).double() + 1
    loops = torch.arange(n)
    h = graph.x
    for layer in range(3):
        scale = s if layer else torch.ones_like(s)
        mine = {k[len(f"convs.{layer}."):]: q for k, q in params.items()
                if k.startswith(f"convs.{layer}.")}
        width = (mine.get("lin.weight") if model_name != "sage" else mine["lin_l.weight"]).size(0)
        if model_name == "gcn":  # D^-1/2 (A + I) D^-1/2 of the whole graph, edges scaled
            conv = GCNConv(h.size(1), width, normalize=False, add_self_loops=False)
            w = torch.cat([(deg[src] * deg[dst]).rsqrt() * scale.double(), 1 / deg]).float()
            ei = torch.stack([torch.cat([src, loops]), torch.cat([dst, loops])])
            h = torch.func.functional_call(conv, mine, (h, ei, w))
        elif model_name == "sage":  # mean over the FULL in-degree, rows scaled: lin_l(mean) + lin_r(h)
            agg = torch.zeros(n, h.size(1)).index_add_(0, dst, h[src] * scale[:, None])
            agg = agg / torch.bincount(dst, minlength=n).clamp_min(1)[:, None].float()
            h = agg @ mine["lin_l.weight"].t() + mine["lin_l.bias"] + h @ mine["lin_r.weight"].t()
        else:  # GAT: the kept edges and every self-loop, attention over those
            conv = GATConv(h.size(1), width, add_self_loops=False)
            keep = graph.edge_index[:, scale > 0]
            ei = torch.cat([keep, loops.repeat(2, 1)], 1)
            h = torch.func.functional_call(conv, mine, (h, ei))
        if layer < 2:
            h = F.relu(h)
    loss = F.cross_entropy(h[graph.train_mask], graph.y[graph.train_mask])
    loss.backward()
    return float(loss.detach()), [params[k].grad for k in names]


@pytest.mark.parametrize("model,run", [("gcn", "p05"), ("sage", "p05_sage"), ("gat", "p05_gat")])
def test_a_sampled_step_is_an_independent_whole_graph_computation(world, model, run):
    """BNS-GCN's |B|/s scaling at p < 1 in forward AND backward (its gradients travel back scaled
    by autograd through the exchange): the loss of each step and the all-reduced parameter
    gradients equal those of the whole graph with that step's edges and factors."""
    graph, ranks = world.graph, world.ranks
    for t in range(2):
        loss, grads = reference_step(graph, ranks, run, t, 0.5, model)
        assert total(ranks, run, "loss")[t] == pytest.approx(loss, rel=1e-5), t
        for r in ranks:  # identical on every worker after the all-reduce
            for got, want in zip(r[run][t]["grads"], grads):
                assert torch.allclose(got, want, rtol=1e-4, atol=1e-6), (t, got, want)


def test_bytes_count_only_sampled_rows(world):
    halo_rows, ranks = world.halo_rows, world.ranks
    # from step 1 on (step 0's forward also counts the input features, fetched once)
    full = total(ranks, "exact_gcn", "bytes_halo_fwd")[1]
    assert full == halo_rows * H * 4 * 2  # two hidden layers exchanged
    assert total(ranks, "exact_gcn", "bytes_halo_bwd")[0] == full
    inputs = total(ranks, "exact_gcn", "input_bytes")[0]
    assert total(ranks, "exact_gcn", "bytes_halo_fwd")[0] == full + inputs
    for run, p in (("p05", 0.5), ("p01", 0.1), ("p05_sage", 0.5), ("p05_gat", 0.5)):
        rows = sum(math.floor(p * c) for r in ranks for c in r["recv_counts"])
        assert set(total(ranks, run, "bytes_halo_fwd")[1:]) == {rows * H * 4 * 2}, run
        assert total(ranks, run, "bytes_halo_fwd")[0] == rows * H * 4 * 2 + inputs, run
        assert set(total(ranks, run, "bytes_halo_bwd")) == {rows * H * 4 * 2}, run
        assert 0 < rows < halo_rows
        assert abs(ranks[0][run][0]["sampled_fraction"] - p) < 0.05
    for key in ("bytes_halo_fwd", "bytes_halo_bwd", "bytes_store"):
        assert set(total(ranks, "p0", key)[1:]) == {0}, key
    assert total(ranks, "p0", "bytes_halo_bwd")[0] == 0
    # p = 0: no halo message at all, only the parameter all-reduce's 2 (M - 1) per worker
    assert set(total(ranks, "p0", "messages")[1:]) == {2 * 2 * (2 - 1)}


def test_gat_leaves_unsampled_edges_out_in_training_only(world):
    ranks = world.ranks
    for r in ranks:
        n_inner, n_halo = r["n_inner"], sum(r["recv_counts"])
        most = 0
        for row in r["p05_gat"]:
            sel = row["seen"][1][2]
            ok = torch.zeros(n_inner + n_halo, dtype=torch.bool)
            ok[:n_inner] = True
            ok[n_inner + sel] = True
            train = [(l, e) for l, training, e in row["edges"] if training]
            assert [l for l, _ in train] == [1, 2]
            for _, e in train:
                assert ok[e[0]].all()  # every edge kept comes from an inner or a sampled row
                assert (e[0] >= n_inner).sum() > 0
            most = max([most] + [e.size(1) for _, e in train])
        evaluated = [n for _, training, n in r["end"]["p05_gat"]["eval_edges"] if not training]
        assert evaluated and all(n > most for n in evaluated)  # evaluation: the whole local graph


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_pipegcn_on_every_model(world, model):
    """PipeGCN on SAGE and GAT (GCN: test_pipegcn.py): step 0 reads the exact fill (exact's loss),
    later steps move exactly exact's bytes, and the stale halo changes the arithmetic."""
    ranks = world.ranks
    pipe, exact = total(ranks, f"pipe_{model}", "loss"), total(ranks, f"exact_{model}", "loss")
    assert pipe[0] == pytest.approx(exact[0], abs=1e-6)
    assert abs(pipe[2] - exact[2]) > 1e-6
    for key in ("bytes_halo_fwd", "bytes_halo_bwd"):
        assert total(ranks, f"pipe_{model}", key)[1:] == total(ranks, f"exact_{model}", key)[1:3]


def test_flags_are_grouped_and_checked(capsys):
    from digest.cli import main
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    assert "[--method bnsgcn]" in text and "[--method pipegcn]" in text
    assert "--boundary-rate" in text and "--pipe-smoothing" in text
    for args in (["--method", "exact", "--boundary-rate", "0.5"],
                 ["--method", "bnsgcn", "--pipe-smoothing", "0.5"],
                 ["--method", "bnsgcn", "--boundary-rate", "1.5"],
                 ["--method", "pipegcn", "--pipe-smoothing", "1"]):
        assert main(["train", *args, "--epochs", "1"]) == 2, args
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and err[0].startswith("error:"), err
