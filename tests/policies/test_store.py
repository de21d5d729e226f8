"""DIGEST's stale representation store (docs/methods.md section 4) behaves as specified."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv

from digest.runtime import comm
from digest.data.cache import load_book, prepare_partition
from digest.config import TrainConfig
from digest.data.synthetic import make_synthetic
from digest.training.trainer import Trainer
from helpers import run_workers

STEPS = 6


def record(cfg, rt, part):
    """Per step: the halo rows used (from the store), the inner rows computed, the parameters
    before the step, and the store bytes of the step."""
    trainer = Trainer(cfg, rt, part)
    steps = []
    for t in range(cfg.optim.epochs):
        params = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        comm.traffic.reset()
        loss = trainer.step(t)
        policy = trainer.policy
        steps.append({"used": {l: v.clone() for l, v in policy.used.items()},
                      "computed": {l: v.clone() for l, v in policy.latest.items()},
                      "params": params, "loss": loss, "store_bytes": comm.traffic.bytes["store"],
                      "age": policy.age, "state": policy.state()})
    return part.global_ids, part.n_inner, steps


def owners_rows(ranks, num_nodes: int) -> dict:
    """(step, layer) -> every node's rows ``[num_nodes, F]`` as computed by its owner in that step,
    from ``record``'s output of every rank."""
    computed = {}
    for ids, n_inner, steps in ranks:
        for t, s in enumerate(steps):
            for l, rows in s["computed"].items():
                full = computed.setdefault((t, l), torch.zeros(num_nodes, rows.size(1)))
                full[ids[:n_inner]] = rows
    return computed


def _graph():
    return make_synthetic(nodes=240, classes=4, avg_degree=8, features=12, seed=7)


def test_interval_one_uses_the_owners_rows_of_the_previous_step(tmp_path):
    graph = _graph()
    part_dir = prepare_partition("store", 3, "metis", 0, tmp_path, graph=graph)
    cfg = TrainConfig.of(dataset="store", method="digest", sync_interval=1, hidden=8, layers=3,
                      dropout=0.0, epochs=STEPS)
    ranks = run_workers(record, cfg, part_dir, 3)
    computed = owners_rows(ranks, graph.num_nodes)
    for ids, n_inner, steps in ranks:
        halo_ids = ids[n_inner:]
        for t in range(1, STEPS):
            for l in (1, 2):
                assert torch.equal(steps[t]["used"][l], computed[(t - 1, l)][halo_ids]), (t, l)
                assert steps[t]["age"] == 1
    # the first hidden layer's halo equals the exact full-graph h^1 under step t-1's parameters
    params = ranks[0][2][2]["params"]
    conv = GCNConv(graph.num_features, 8)
    conv.load_state_dict({k[len("convs.0."):]: v for k, v in params.items() if k.startswith("convs.0.")})
    h1 = F.relu(conv(graph.x, graph.edge_index))
    for ids, n_inner, steps in ranks:
        assert torch.allclose(steps[3]["used"][1], h1[ids[n_inner:]], atol=1e-5)


def test_step_zero_is_exact(tmp_path):
    graph = _graph()
    part_dir = prepare_partition("store", 3, "metis", 0, tmp_path, graph=graph)
    losses = {}
    for method in ("exact", "digest"):
        cfg = TrainConfig.of(dataset="store", method=method, hidden=8, layers=3, dropout=0.0, epochs=1)
        losses[method] = sum(r[2][0]["loss"] for r in run_workers(record_loss, cfg, part_dir, 3))
    assert abs(losses["exact"] - losses["digest"]) < 1e-6


def record_loss(cfg, rt, part):
    trainer = Trainer(cfg, rt, part)
    return None, None, [{"loss": trainer.step(0)}]


def test_sync_schedule_and_store_bytes(tmp_path):
    graph = _graph()
    part_dir = prepare_partition("store", 4, "metis", 0, tmp_path, graph=graph)
    halo_rows = sum(load_book(part_dir).stats["halo_sizes"])  # = rows pushed, over all workers
    cfg = TrainConfig.of(dataset="store", method="digest", sync_interval=10, hidden=6, layers=3,
                      dropout=0.5, epochs=31)
    ranks = run_workers(record, cfg, part_dir, 4)
    per_step = [sum(r[2][t]["store_bytes"] for r in ranks) for t in range(31)]
    per_sync = halo_rows * 6 * 4 * (3 - 1)  # rows x hidden width x 4 bytes x (L - 1) layers
    # step 0: the exact filling pass; then syncs right after steps 9, 19, 29 and never otherwise
    assert [t for t, b in enumerate(per_step) if b] == [0, 9, 19, 29]
    assert per_step[9] == per_step[19] == per_step[29] == per_sync
    ages = [ranks[0][2][t]["age"] for t in range(31)]
    assert ages[:12] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2]
    assert max(ages) <= 10


def fill_modes(cfg, rt, part):
    trainer = Trainer(cfg, rt, part)
    trainer.model.train()
    modes = []
    trainer.policy._fill(lambda halo: modes.append(trainer.model.training) or trainer.forward(halo))
    return modes, trainer.model.training


def test_the_store_fill_runs_as_the_pushes_do(tmp_path):
    """The rows that fill the store before step 0 come from a training-mode forward (dropout, batch
    statistics) like every later push, not from an eval-mode one ."""
    part_dir = prepare_partition("store", 2, "metis", 0, tmp_path, graph=_graph())
    cfg = TrainConfig.of(dataset="store", method="digest", hidden=8, dropout=0.5, batch_norm=True)
    for modes, after in run_workers(fill_modes, cfg, part_dir, 2):
        assert modes == [True] and after is True


def test_stale_error_per_layer_at_each_sync(tmp_path):
    """At every sync, each layer's ||stale - fresh|| / ||fresh|| over the halo
    rows the step read (stale) and the owners' rows of that same step (fresh); None between."""
    graph = _graph()
    part_dir = prepare_partition("store", 2, "metis", 0, tmp_path, graph=graph)
    cfg = TrainConfig.of(dataset="store", method="digest", sync_interval=3, hidden=8, layers=3,
                      dropout=0.5, epochs=9)
    ranks = run_workers(record, cfg, part_dir, 2)
    computed = owners_rows(ranks, graph.num_nodes)
    for ids, n_inner, steps in ranks:
        for t, s in enumerate(steps):
            if (t + 1) % 3:
                assert not any(k.startswith("stale_err") for k in s["state"]), (t, s["state"])
                continue
            for l in (1, 2):
                fresh = computed[(t, l)][ids[n_inner:]]
                want = float((s["used"][l] - fresh).norm() / fresh.norm())
                assert s["state"][f"stale_err_l{l}"] == pytest.approx(want, rel=1e-5), (t, l)
                assert 0 < want < 10
            if t + 1 < len(steps):  # and the fresh rows are what the next step reads
                assert torch.equal(steps[t + 1]["used"][1], computed[(t, 1)][ids[n_inner:]])


def fit(cfg, rt, part, out_dir):
    from pathlib import Path
    return Trainer(cfg, rt, part).fit(Path(out_dir), {})


def test_stale_error_columns_in_metrics(tmp_path):
    import pandas as pd
    part_dir = prepare_partition("store", 2, "metis", 0, tmp_path, graph=_graph())
    cfg = TrainConfig.of(dataset="store", method="digest", sync_interval=2, hidden=8, layers=3,
                      epochs=6, progress=False)
    run_workers(fit, cfg, part_dir, 2, out_dir=str(tmp_path / "run"))
    m = pd.read_csv(tmp_path / "run" / "metrics.csv")
    for col in ("stale_err_l1", "stale_err_l2"):
        assert m[col].notna().tolist() == [False, True] * 3, m[col].tolist()  # syncs after 1, 3, 5
        assert (m[col].dropna() > 0).all()
    assert "stale_err_l3" not in m.columns  # the last layer's output is never exchanged
