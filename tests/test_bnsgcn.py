"""BNS-GCN (docs/methods.md section 8.2) in 2 real worker processes, plus every model under PipeGCN
and BNS-GCN: p = 1 is exact (losses over 20 epochs, GCN, SAGE and GAT), the rows a receiver gets are
its owners' rows of the same step, sampled by the shared seed and rescaled; bytes count only the
sampled rows; GAT leaves the unsampled halo rows' edges out; --resume through the command line.

All in-process configurations run in ONE launch (worker start-up dominates the cost)."""
from __future__ import annotations

import math

import pytest
import torch

from digest.runtime import comm
from digest.data.cache import load_book, prepare_partition
from digest.config import TrainConfig, validate
from digest.data.synthetic import make_synthetic
from digest.training.trainer import Trainer
from distributed import run_workers
from reliability_util import assert_resumes_identically

H = 8
BASE = TrainConfig.of(dataset="bns", hidden=H, layers=3, dropout=0.0, epochs=20, progress=False)
RUNS = {
    **{f"exact_{m}": dict(method="exact", model=m) for m in ("gcn", "sage", "gat")},
    **{f"p1_{m}": dict(method="bnsgcn", model=m, boundary_rate=1.0)
       for m in ("gcn", "sage", "gat")},
    "p05": dict(method="bnsgcn", boundary_rate=0.5, epochs=3),
    "p01": dict(method="bnsgcn", epochs=2),  # the default p = 0.1
    "p0": dict(method="bnsgcn", boundary_rate=0.0, epochs=2),
    "p05_gat": dict(method="bnsgcn", model="gat", boundary_rate=0.5, epochs=2),
    "p01_sage": dict(method="bnsgcn", model="sage", epochs=2),
    "pipe_sage": dict(method="pipegcn", model="sage", epochs=2),
    "pipe_gat": dict(method="pipegcn", model="gat", epochs=2),
    "pipe_gcn": dict(method="pipegcn", model="gcn", epochs=2, dropout=0.5),
}


def train_all(cfg, rt, part, runs):
    torch.set_num_threads(1)
    out = {"ids": part.global_ids.clone(), "n_inner": part.n_inner,
           "recv_counts": list(part.recv_counts)}
    for name, over in runs.items():
        run_cfg = cfg.replace(**over)
        validate(run_cfg)
        trainer = Trainer(run_cfg, rt, part)
        policy, seen, edges = trainer.policy, {}, []

        def spy(layer, h, policy=policy, halo=policy.halo, seen=seen):
            rows = halo(layer, h)
            seen[layer] = (h.detach().clone(), rows.detach().clone(),
                           None if policy.recv_sel is None else policy.recv_sel.clone())
            return rows
        if run_cfg.method == "bnsgcn":
            policy.halo = spy  # the trainer reads policy.halo at every step
        if run_cfg.model.model == "gat":  # registered after the policy's hook: sees its edges
            for layer in range(1, len(trainer.model.convs)):
                trainer.model.convs[layer].register_forward_pre_hook(
                    lambda mod, args, layer=layer: edges.append(
                        (layer, trainer.model.training, args[1].clone())))
        rows = []
        for epoch in range(run_cfg.optim.epochs):
            comm.traffic.reset()
            seen.clear()
            edges.clear()
            loss = trainer.step(epoch)
            rows.append({"loss": loss, **comm.traffic.snapshot(), **policy.state(),
                         "seen": dict(seen), "edges": list(edges)})
        trainer.evaluate()
        out[name] = {"rows": rows, "eval_edges": [(l, t, e.size(1)) for l, t, e in edges]}
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    graph = make_synthetic(nodes=300, classes=4, avg_degree=8, features=12, seed=5)
    part_dir = prepare_partition("bns", 2, "metis", 0, tmp_path_factory.mktemp("data"), graph=graph)
    halo_rows = sum(load_book(part_dir).stats["halo_sizes"])
    return graph, halo_rows, run_workers(train_all, BASE, part_dir, 2, runs=RUNS)


def total(ranks, run, key):
    n = len(ranks[0][run]["rows"])
    return [sum(r[run]["rows"][t][key] for r in ranks) for t in range(n)]


@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
def test_rate_one_equals_exact(world, model):
    _, _, ranks = world
    exact, p1 = total(ranks, f"exact_{model}", "loss"), total(ranks, f"p1_{model}", "loss")
    assert len(p1) == 20 and max(abs(a - b) for a, b in zip(exact, p1)) < 1e-4
    assert exact[-1] < exact[0]
    for key in ("bytes_halo_fwd", "bytes_halo_bwd", "messages"):
        assert total(ranks, f"p1_{model}", key) == total(ranks, f"exact_{model}", key), key
    assert ranks[0][f"p1_{model}"]["rows"][0]["sampled_fraction"] == 1.0


def test_receivers_get_their_owners_rows_sampled_and_rescaled(world):
    graph, _, ranks = world
    p = 0.5
    for t in range(3):
        for layer in (1, 2):
            full = torch.zeros(graph.num_nodes, H)  # owners' rows of this step, by global id
            for r in ranks:
                full[r["ids"][: r["n_inner"]]] = r["p05"]["rows"][t]["seen"][layer][0]
            for r in ranks:
                _, halo, sel = r["p05"]["rows"][t]["seen"][layer]
                ids = r["ids"][r["n_inner"]:]
                start, want = 0, torch.zeros_like(halo)
                for c in r["recv_counts"]:  # per owner: floor(p c) rows, scaled by c / floor(p c)
                    k = math.floor(p * c)
                    mine = sel[(sel >= start) & (sel < start + c)]
                    assert mine.numel() == k
                    if k:
                        want[mine] = full[ids[mine]] * (c / k)
                    start += c
                assert torch.allclose(halo, want, atol=1e-6), (t, layer)
                assert (halo.abs().sum(1) > 0).sum() <= sel.numel()
    sels = [ranks[0]["p05"]["rows"][t]["seen"][1][2] for t in range(3)]
    assert not torch.equal(sels[0], sels[1]) or not torch.equal(sels[1], sels[2])  # resampled


def test_bytes_count_only_sampled_rows(world):
    _, halo_rows, ranks = world
    # from step 1 on (step 0's forward also counts the input features, fetched once)
    full = total(ranks, "exact_gcn", "bytes_halo_fwd")[1]
    assert full == halo_rows * H * 4 * 2  # two hidden layers exchanged
    assert total(ranks, "exact_gcn", "bytes_halo_bwd")[0] == full
    inputs = total(ranks, "exact_gcn", "bytes_halo_fwd")[0] - full
    for run, p in (("p05", 0.5), ("p01", 0.1)):
        rows = sum(math.floor(p * c) for r in ranks for c in r["recv_counts"])
        assert set(total(ranks, run, "bytes_halo_fwd")[1:]) == {rows * H * 4 * 2}, run
        assert total(ranks, run, "bytes_halo_fwd")[0] == rows * H * 4 * 2 + inputs, run
        assert set(total(ranks, run, "bytes_halo_bwd")) == {rows * H * 4 * 2}, run
        assert 0 < rows < halo_rows
        assert abs(ranks[0][run]["rows"][0]["sampled_fraction"] - p) < 0.05
    for key in ("bytes_halo_fwd", "bytes_halo_bwd", "bytes_store"):
        assert set(total(ranks, "p0", key)[1:]) == {0}, key
    assert total(ranks, "p0", "bytes_halo_bwd")[0] == 0
    # p = 0: no halo message at all, only the parameter all-reduce's 2 (M - 1) per worker
    assert set(total(ranks, "p0", "messages")[1:]) == {2 * 2 * (2 - 1)}


def test_gat_leaves_unsampled_edges_out_in_training_only(world):
    _, _, ranks = world
    for r in ranks:
        n_inner, n_halo = r["n_inner"], sum(r["recv_counts"])
        most = 0
        for row in r["p05_gat"]["rows"]:
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
        evaluated = [n for _, training, n in r["p05_gat"]["eval_edges"] if not training]
        assert evaluated and all(n > most for n in evaluated)  # evaluation: the whole local graph


def test_every_model_runs(world):
    _, _, ranks = world
    for run in ("p01_sage", "p05_gat", "pipe_sage", "pipe_gat", "pipe_gcn"):
        losses = total(ranks, run, "loss")
        assert len(losses) == 2 and all(math.isfinite(x) for x in losses), run


DATASET = "synthetic:nodes=300,avg_degree=5,features=16,classes=4,seed=1"


def test_resume_continues_identically(tmp_path):
    """Checkpointed at epoch 4, resumed to 6: the losses and accuracies of a direct 6-epoch run
    (the sample is a function of (seed, step, owner, peer), so nothing needs saving)."""
    data = tmp_path / "data"
    common = ["train", "--dataset", DATASET, "--method", "bnsgcn", "--boundary-rate", "0.3",
              "--workers", 2, "--hidden", 16, "--timeout", 60, "--no-progress"]
    assert_resumes_identically(common, data, tmp_path)


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
