"""Mini-batch neighbour sampling (docs/methods.md 10.3, baselines/minibatch.py): the sampler behind
PyG's NeighborLoader on a hand-made graph, then 3 real gloo workers in ONE launch: full fan-out
with one batch per worker = exact full-graph training (SAGE and GCN), equal steps, every training
node a seed once per epoch (both seed modes), local-only sampling, fetched features (the
replica's training, hand-derived bytes), bytes; bad values through the command line."""
from __future__ import annotations

import json

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

from baselines.minibatch import MiniBatchTrainer, fanouts
from baselines.sampling import TorchNeighborSampler, assemble, own_share, select_rows
from digest.config import TrainConfig, validate
from digest.data.graph import canonical_edges
from digest.data.local_graph import extract_part
from digest.data.partition import partition
from digest.data.synthetic import make_synthetic
from digest.runtime import comm
from digest.training.trainer import Trainer
from helpers import here, resumed, rows


def small_graph(n=60, edges=150, seed=0):
    g = torch.Generator().manual_seed(seed)
    return canonical_edges(torch.randint(0, n, (2, edges), generator=g), n), n


def sample(edge_index, n, seeds, fan, seed=0):
    data = Data(edge_index=edge_index, num_nodes=n)
    sampler = TorchNeighborSampler(data, fan)
    sampler.generator.manual_seed(seed)
    loader = NeighborLoader(data, num_neighbors=fan, input_nodes=seeds, batch_size=seeds.numel(),
                            neighbor_sampler=sampler)
    return next(iter(loader))


def in_neighbours(edge_index, v):
    return set(edge_index[0][edge_index[1] == v].tolist())


@pytest.mark.parametrize("fan", [[-1, -1], [3, 2], [1, 1, 1]])
def test_sampler(fan):
    """n_id starts with the seeds; every node first reached before the last hop drew
    min(f, in-degree) distinct in-neighbours of the graph (all for -1), each hop's count as
    reported; edges are real edges in global ids; the same generator seed, the same sample."""
    ei, n = small_graph()
    seeds = torch.tensor([3, 17, 40, 41])
    b = sample(ei, n, seeds, fan)
    nid = b.n_id
    assert torch.equal(nid[:4], seeds) and b.batch_size == 4
    assert nid.unique().numel() == nid.numel() == sum(b.num_sampled_nodes)
    assert b.edge_index.size(1) == sum(b.num_sampled_edges)
    src, dst = nid[b.edge_index[0]], nid[b.edge_index[1]]
    real = set(zip(ei[0].tolist(), ei[1].tolist()))
    assert set(zip(src.tolist(), dst.tolist())) <= real
    assert len(set(zip(src.tolist(), dst.tolist()))) == src.numel()  # without replacement
    bounds = torch.cumsum(torch.tensor([0] + b.num_sampled_nodes), 0).tolist()
    for hop, f in enumerate(fan):  # the nodes of this hop drew their in-neighbours
        for v in nid[bounds[hop]:bounds[hop + 1]].tolist():
            drawn = set(src[dst == v].tolist())
            full = in_neighbours(ei, v)
            assert drawn <= full
            assert len(drawn) == (len(full) if f < 0 else min(f, len(full)))
    last = set(nid[bounds[len(fan)]:].tolist())  # the last hop's new nodes drew nothing
    assert not (last & set(dst.tolist()))
    again = sample(ei, n, seeds, fan)
    assert torch.equal(again.n_id, nid) and torch.equal(again.edge_index, b.edge_index)
    if fan == [3, 2]:
        other = sample(ei, n, seeds, fan, seed=1)
        assert not torch.equal(other.n_id, nid) or not torch.equal(other.edge_index, b.edge_index)


def test_full_fanout_reaches_the_l_hop_neighbourhood():
    ei, n = small_graph(seed=3)
    seeds = torch.tensor([5])
    b = sample(ei, n, seeds, [-1, -1])
    hop1 = in_neighbours(ei, 5) | {5}
    hop2 = set().union(*(in_neighbours(ei, v) for v in hop1)) | hop1
    assert set(b.n_id.tolist()) == hop2


def test_select_rows_of_sparse_features():
    x = torch.zeros(7, 5)
    x[1, 2], x[3, 0], x[3, 4], x[6, 1] = 1.0, 2.0, 3.0, 4.0
    idx = torch.tensor([3, 0, 6, 3])
    assert torch.equal(select_rows(x.to_sparse_csr(), idx).to_dense(), x[idx])
    assert torch.equal(select_rows(x, idx), x[idx])


@pytest.mark.parametrize("sparse", [False, True])
def test_the_parts_assemble_into_the_graph(sparse):
    """What the workers gather at start-up is the whole graph: its edges, features (dense, or
    sparse as CS's), labels, training mask, degrees, and which part owns each node."""
    graph = make_synthetic(nodes=90, classes=3, avg_degree=5, features=6, seed=7)
    if sparse:
        graph.x = (graph.x * (graph.x > 0.5)).to_sparse()
    book = partition(graph, 3, "metis", 0)
    parts = [extract_part(graph, book, m) for m in range(3)]
    g = assemble([own_share(p) for p in parts])
    assert set(zip(*g["edge_index"].tolist())) == set(zip(*graph.edge_index.tolist()))
    assert g["edge_index"].size(1) == graph.num_edges
    X = g["x"].to_dense() if sparse else g["x"]
    assert g["x"].is_sparse == sparse
    assert torch.equal(X, graph.x.to_dense() if sparse else graph.x)
    assert torch.equal(g["y"], graph.y) and torch.equal(g["train"], graph.train_mask)
    assert torch.equal(g["deg"], torch.bincount(graph.edge_index[1], minlength=90))
    assert torch.equal(g["part_of"], book.part_of)


def test_fanouts():
    assert fanouts("", 3) == [15, 10, 5] and fanouts("", 2) == [10, 10]
    assert fanouts("-1,4", 2) == [-1, 4]
    for bad, needle in (("5", "one fan-out per layer (2), got 1"), ("a,b", "comma-separated"),
                        ("0,3", ">= 1 or -1")):
        with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            fanouts(bad, 2)


# -- three workers --------------------------------------------------------------------------------

WORKERS, EPOCHS = 3, 3
BASE = TrainConfig.of(dataset="mb", hidden=16, layers=2, dropout=0.0, epochs=EPOCHS,
                      progress=False)
FULL = dict(method="minibatch", mb_fanouts="-1,-1", batch_size=10_000)
RUNS = {
    "exact_sage": dict(method="exact", model="sage"),
    "mb_sage": dict(FULL, model="sage"),
    "exact_gcn": dict(method="exact", model="gcn"),
    "mb_gcn": dict(FULL, model="gcn"),
    "small": dict(method="minibatch", batch_size=7, mb_fanouts="4,3", model="sage", epochs=2),
    "random": dict(method="minibatch", batch_size=7, mb_seeds="random", model="sage", epochs=2),
    "local": dict(method="minibatch", batch_size=7, mb_local_only=True, model="sage", epochs=1),
    # --mb-features fetch: the same runs with the rows fetched from their owners
    "fetch_full": dict(FULL, model="sage", mb_features="fetch"),
    "small_fetch": dict(method="minibatch", batch_size=7, mb_fanouts="4,3", model="sage", epochs=2,
                        mb_features="fetch"),
    "random_fetch": dict(method="minibatch", batch_size=7, mb_seeds="random", model="sage",
                         epochs=2, mb_features="fetch"),
}


def record(cfg, rt, part, runs, out_dir):
    torch.set_num_threads(1)
    out = {"inner": part.global_ids[: part.n_inner].clone()}
    for name, over in runs.items():
        run_cfg = cfg.replace(**over)
        validate(run_cfg)
        cls = MiniBatchTrainer if run_cfg.method == "minibatch" else Trainer
        trainer = cls(run_cfg, rt, part)
        steps = []
        for t in range(run_cfg.optim.epochs):
            comm.traffic.reset()
            loss = trainer.step(t)
            steps.append({"loss": loss, **comm.traffic.snapshot(), **trainer.policy.state()})
        rec = {"steps": steps, "params": [p.detach().clone() for p in trainer.model.parameters()],
               "eval": trainer.evaluate()}
        if run_cfg.method == "minibatch":
            mb = trainer.policy
            rec["chunks"] = [mb.chunks(e) for e in range(run_cfg.optim.epochs)]
            if name in ("local", "small"):
                rec["sampled"] = mb.sample(rec["chunks"][0][0][0], 0, 0).n_id
        out[name] = rec
    # resumption: dropout on, several steps per epoch, stopped after epoch 1
    run_cfg = cfg.replace(**{**runs["small"], "dropout": 0.5, "epochs": 3})
    direct = MiniBatchTrainer(run_cfg, rt, part)
    out["direct"] = [direct.step(t) for t in range(3)]
    out["resumed"] = resumed(run_cfg, rt, part, out_dir, 1, MiniBatchTrainer)
    return out


# the one launch of this module's `world` fixture (tests/conftest.py)
WORLD = dict(fn=record, cfg=BASE, workers=WORKERS, runs=RUNS, out_dir=True,
             graph=dict(nodes=240, classes=3, avg_degree=6, features=10, seed=2))


@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_full_fanout_one_batch_is_exact(world, model):
    """Fan-out -1 and one chunk per worker: each epoch is one full-graph step, loss for loss, the
    parameters equal up to round-off (the sampled subgraph sums in another order)."""
    ranks = world.ranks
    mb, ex = f"mb_{model}", f"exact_{model}"
    for t in range(EPOCHS):
        a = sum(r[mb]["steps"][t]["loss"] for r in ranks)
        b = sum(r[ex]["steps"][t]["loss"] for r in ranks)
        assert a == pytest.approx(b, rel=1e-5, abs=1e-7), t
    for r in ranks:
        for p, q in zip(r[mb]["params"], r[ex]["params"]):
            assert torch.allclose(p, q, rtol=1e-4, atol=1e-6)
        assert r[mb]["eval"] == pytest.approx(r[ex]["eval"])
        for s in r[mb]["steps"]:
            assert s["mb_steps"] == 1 and s["features_replicated"] == 1 and s["replica_mb"] > 0
            assert s["bytes_halo_fwd"] == s["bytes_halo_bwd"] == s["bytes_store"] == 0
            assert s["bytes_params"] == r[ex]["steps"][1]["bytes_params"]  # one all-reduce
    # training moved the parameters (the comparison is not of two untrained models)
    assert ranks[0]["mb_sage"]["steps"][0]["loss"] != ranks[0]["mb_sage"]["steps"][-1]["loss"]


@pytest.mark.parametrize("run", ["small", "random"])
def test_every_training_node_is_a_seed_once_per_epoch(world, run):
    graph, ranks = world.graph, world.ranks
    train = set(graph.train_mask.nonzero().squeeze(1).tolist())
    S = -(-len(train) // (WORKERS * 7))
    for e in range(2):
        seeds = []
        for r in ranks:
            chunks, totals = r[run]["chunks"][e]
            assert len(chunks) == S  # equal step counts on every worker
            assert max(c.numel() for c in chunks) - min(c.numel() for c in chunks) <= 1
            assert totals == [sum(int(q[run]["chunks"][e][0][t].numel()) for q in ranks)
                              for t in range(S)]
            seeds += [v for c in chunks for v in c.tolist()]
            if run == "small":  # part seeds: the worker's own training nodes
                assert set(seeds[-sum(c.numel() for c in chunks):]) <= set(r["inner"].tolist())
        assert sorted(seeds) == sorted(train)
    first = [v for r in ranks for c in r[run]["chunks"][0][0] for v in c.tolist()]
    second = [v for r in ranks for c in r[run]["chunks"][1][0] for v in c.tolist()]
    assert first != second  # a new shuffle every epoch
    for r in ranks:
        for s in r[run]["steps"]:
            assert s["mb_steps"] == S and s["mb_batch_mean"] > 0
            assert s["bytes_params"] == S * ranks[0]["mb_sage"]["steps"][0]["bytes_params"]
            assert s["mb_nodes_hop0"] == pytest.approx(s["mb_batch_mean"])
            assert s["sample_time"] > 0 and s["mb_compute_time"] > 0 and s["allreduce_time"] > 0


def test_local_only_samples_inside_the_part(world):
    ranks = world.ranks
    for r in ranks:
        assert set(r["local"]["sampled"].tolist()) <= set(r["inner"].tolist())
    # without the restriction the same seeds' neighbourhoods reach other parts
    assert any(not set(r["small"]["sampled"].tolist()) <= set(r["inner"].tolist()) for r in ranks)


@pytest.mark.parametrize("fetched,replicated", [("fetch_full", "mb_sage"), ("small_fetch", "small"),
                                                ("random_fetch", "random")])
def test_fetched_features_train_as_the_replica_does(world, fetched, replicated):
    """Rows (and, with random seeds, labels) fetched from their owners are the replica's rows:
    the same losses and parameters to the bit; only feat_fetch bytes are added."""
    ranks = world.ranks
    for r in ranks:
        for a, b in zip(r[fetched]["steps"], r[replicated]["steps"]):
            assert a["loss"] == b["loss"]
            assert a["bytes_params"] == b["bytes_params"] and a["bytes_halo_fwd"] == 0
            assert a["bytes_feat_fetch"] > 0 and "bytes_feat_fetch" not in b
            assert a["bytes_total"] == b["bytes_total"] + a["bytes_feat_fetch"]
            assert a["features_replicated"] == 0 and b["features_replicated"] == 1
            assert a["mb_fetched_rows"] > 0 and a["fetch_time"] > 0
        assert all(torch.equal(p, q) for p, q in zip(r[fetched]["params"], r[replicated]["params"]))


def test_fetch_bytes_are_the_hand_derived_count(world):
    """Full fan-out, one step per epoch: worker m needs the rows of every node within L = 2 hops
    upstream of its training nodes that another worker owns (PyG's k_hop_subgraph, not the
    sampler). It sends 2 x 8 B of counts to each peer and 8 B per id it asks for, and 4 F B per
    row it is asked for; seeds are its own (--mb-seeds part), so no labels travel."""
    from torch_geometric.utils import k_hop_subgraph
    graph, ranks = world.graph, world.ranks
    F0, M = graph.x.size(1), len(ranks)
    inner = [set(r["inner"].tolist()) for r in ranks]
    need = []
    for m in range(M):
        seeds = torch.tensor(sorted(inner[m] & set(graph.train_mask.nonzero().squeeze(1).tolist())))
        reach = set(k_hop_subgraph(seeds, 2, graph.edge_index, num_nodes=graph.num_nodes)[0].tolist())
        need.append(reach - inner[m])
    for m, r in enumerate(ranks):
        asked_of_me = sum(len(need[q] & inner[m]) for q in range(M) if q != m)
        want = 16 * (M - 1) + 8 * len(need[m]) + 4 * F0 * asked_of_me
        for s in r["fetch_full"]["steps"]:
            assert s["bytes_feat_fetch"] == want
            assert s["mb_fetched_rows"] == len(need[m])


def test_resume_continues_identically(world):
    ranks = world.ranks
    for r in ranks:
        assert r["resumed"] == r["direct"]


# -- the command line -----------------------------------------------------------------------------

@pytest.mark.parametrize("flags,message", [
    (["--batch-size", "0"], "error: --batch-size must be >= 1"),
    (["--mb-fanouts", "10,10"], "error: --mb-fanouts needs one fan-out per layer (3), got 2"),
    (["--mb-fanouts", "10,0,5"], "error: --mb-fanouts: each fan-out must be >= 1 or -1 (all "
                                 "neighbours)"),
])
def test_bad_values_are_one_line(flags, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    rc, err = here(["train", "--method", "minibatch", *flags, "--out", tmp_path / "run"], capsys)
    assert rc == 2 and err == [message]
    assert not (tmp_path / "run").exists()


def test_fetched_sparse_features_train_as_the_replica_does(tmp_path, capsys, monkeypatch):
    """Sparse input features (as CS's and Physics'): the own rows are cut from the sparse part and
    the fetched rows travel dense; the run's accuracies equal the replicated run's, its losses up
    to round-off (the first layer multiplies dense rows, not sparse ones)."""
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    runs = {}
    for mode in ("replicated", "fetch"):
        rc, err = here(["train", "--method", "minibatch", "--mb-features", mode, "--sparse",
                        "always", "--dataset", "synthetic:nodes=300,features=12", "--workers", 2,
                        "--epochs", 2, "--batch-size", 16, "--hidden", 8, "--layers", 2,
                        "--no-progress", "--out", tmp_path / mode], capsys)
        assert rc == 0, err
        runs[mode] = rows(tmp_path / mode / "metrics.csv")
        summary = json.loads((tmp_path / mode / "summary.json").read_text())
        assert summary["dataset"]["sparse_x"] is True
    keys = ("train_acc", "val_acc", "test_acc", "bytes_params")
    assert [[r[k] for k in keys] for r in runs["fetch"]] == \
        [[r[k] for k in keys] for r in runs["replicated"]]
    for a, b in zip(runs["fetch"], runs["replicated"]):  # dense rows against the sparse product
        assert float(a["train_loss"]) == pytest.approx(float(b["train_loss"]), rel=1e-6)
    assert all(int(r["bytes_feat_fetch"]) > 0 for r in runs["fetch"])
    assert "bytes_feat_fetch" not in runs["replicated"][0]
