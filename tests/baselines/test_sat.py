"""SAT (docs/methods.md 10.1, baselines/sat.py; its predictor alone: test_sat_predictor.py),
3 real gloo workers in ONE launch: the temporal graph, identity predictor = DIGEST, the warm-up =
DIGEST, no gradient from the GNN loss into the predictors, DIGEST's bytes, shared predictors, the
guard (a predictor made bad is DIGEST under it, read without it), resumption from a checkpoint;
bad values through the command line."""
from __future__ import annotations

import pytest
import torch

from baselines.sat_predictor import temporal_edges
from digest.config import TrainConfig, validate
from digest.runtime import comm
from digest.training.trainer import Trainer
from helpers import here, resumed

# -- three workers --------------------------------------------------------------------------------

WORKERS, I, STEPS = 3, 3, 8
BASE = TrainConfig.of(method="digest", dataset="sat", hidden=8, layers=3, dropout=0.0, epochs=STEPS,
                      sync_interval=I, progress=False)
RUNS = {  # (another method starts from its own defaults: the interval is given to each)
    "digest": dict(method="digest", sync_interval=I),
    "identity": dict(method="sat", sync_interval=I, sat_predictor="identity"),
    # the reference reading (--no-sat-gate): the prediction is read from the first update on
    "sat": dict(method="sat", sync_interval=I, sat_lr=0.01, sat_gate=False),
    "shared": dict(method="sat", sync_interval=I, sat_shared=True, epochs=6),
    "gate": dict(method="sat", sync_interval=I),  # the guard: on by default
    # a predictor made bad (Adam at lr 1000), under the guard and without it
    "bad": dict(method="sat", sync_interval=I, sat_lr=1000.0),
    "bad-off": dict(method="sat", sync_interval=I, sat_lr=1000.0, sat_gate=False),
    # dropout on, replays kept: the direct run, and the same run checkpointed after step 4 and
    # continued by a new trainer restored from the checkpoint
    "direct": dict(method="sat", sync_interval=2, sat_replay=2, dropout=0.5),
    # --sat-snapshots sync (baselines/sat_sync.py)
    "sync-identity": dict(method="sat", sync_interval=I, sat_predictor="identity",
                          sat_snapshots="sync"),
    "sync": dict(method="sat", sync_interval=I, sat_snapshots="sync", sat_residual=True,
                 sat_steps=3, sat_lr=0.01, sat_gate=False),
    "sync-mean": dict(method="sat", sync_interval=I, sat_predictor="mean", sat_snapshots="sync"),
    "direct-sync": dict(method="sat", sync_interval=2, sat_snapshots="sync", sat_replay=2,
                        sat_steps=2, dropout=0.5),
}


def record(cfg, rt, part, runs, out_dir):
    torch.set_num_threads(1)
    src, dst = temporal_edges(part)
    out = {"ids": part.global_ids.clone(), "n_inner": part.n_inner, "tm": (src, dst)}
    for name, over in runs.items():
        run_cfg = cfg.replace(**over)
        validate(run_cfg)
        trainer = Trainer(run_cfg, rt, part)
        policy = trainer.policy
        steps = []
        for t in range(run_cfg.optim.epochs):
            comm.traffic.reset()
            loss = trainer.step(t)
            rec = {"loss": loss, **comm.traffic.snapshot(), **policy.state(),
                   "grads": [p.grad.clone() for p in trainer.model.parameters()],
                   "used": {l: v.clone() for l, v in policy.used.items()}}
            if hasattr(policy, "predictors"):
                rec["pgrads"] = [None if p.grad is None else p.grad.clone()
                                 for p in policy.predictors.parameters()]
                rec["pparams"] = [p.detach().clone() for p in policy.predictors.parameters()]
                rec["store"] = {l: v.clone() for l, v in policy.store.items()}
            steps.append(rec)
        out[name] = steps
    out["resumed"] = resumed(cfg.replace(**runs["direct"]), rt, part, out_dir, 4)
    out["resumed-sync"] = resumed(cfg.replace(**runs["direct-sync"]), rt, part, out_dir, 5)
    return out


# the one launch of this module's `world` fixture (tests/conftest.py)
WORLD = dict(fn=record, cfg=BASE, workers=WORKERS, runs=RUNS, out_dir=True,
             graph=dict(nodes=240, classes=3, avg_degree=6, features=10, seed=4))


def test_temporal_graph_is_the_induced_subgraph(world):
    """T_m = every edge of G between V_m and H_m, halo-halo edges included, both directions."""
    graph, ranks = world.graph, world.ranks
    s, d = graph.edge_index
    for r in ranks:
        ids = r["ids"]
        local = torch.full((graph.num_nodes,), -1)
        local[ids] = torch.arange(ids.numel())
        inside = (local[s] >= 0) & (local[d] >= 0)
        want = sorted(zip(local[s[inside]].tolist(), local[d[inside]].tolist()))
        src, dst = r["tm"]
        assert sorted(zip(src.tolist(), dst.tolist())) == want
    # halo-halo edges (gathered from their owners) exist here, so that path was exercised
    assert all(bool(((r["tm"][0] >= r["n_inner"]) & (r["tm"][1] >= r["n_inner"])).any())
               for r in ranks)


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("run", ["identity", "sync-identity"])
def test_identity_predictor_is_digest(world, run):
    ranks = world.ranks
    for r in ranks:
        for a, b in zip(r[run], r["digest"]):
            assert a["loss"] == b["loss"] and same(a["grads"], b["grads"])
            assert a["bytes_total"] == b["bytes_total"]
            for key in ("staleness_repr", "store_syncs", "stale_err_l1", "stale_err_l2"):
                assert a.get(key) == b.get(key), key
        # from the first sync on, the identity's rows are read instead of the store's
        assert [s["sat_used_l1"] for s in r[run]] == [0] * I + [1] * (STEPS - I)


def test_warm_up_is_digest_then_the_prediction_is_read(world):
    ranks = world.ranks
    total = [sum(r[run][t]["loss"] for r in ranks) for run in ("sat", "digest")
             for t in range(STEPS)]
    sat, digest = total[:STEPS], total[STEPS:]
    assert sat[:I] == digest[:I]  # steps 0..I-1: the store rows (the predictor untrained)
    assert sat[I] != digest[I]  # step I reads the predictions
    for r in ranks:
        steps = r["sat"]
        assert [s["sat_used_l2"] for s in steps] == [0] * I + [1] * (STEPS - I)
        for a, b in zip(steps, r["digest"]):  # private predictors: DIGEST's bytes, step for step
            for key in ("bytes_halo_fwd", "bytes_halo_bwd", "bytes_store", "bytes_params"):
                assert a[key] == b[key], key
        # at the first sync, the staleness error is DIGEST's and the prediction error is reported
        assert steps[I - 1]["stale_err_l1"] == r["digest"][I - 1]["stale_err_l1"]
        for t in (I - 1, 2 * I - 1):
            assert steps[t]["pred_err_l1"] > 0 and steps[t]["pred_err_l2"] > 0
            assert steps[t]["sat_loss"] > 0
        assert all(s["sat_time"] > 0 and s["sat_mem_mb"] > 0 for s in steps)  # it trained every step
        for t in range(I, STEPS):  # the rows read are the prediction, not the store
            assert not torch.equal(steps[t]["used"][1], r["digest"][t]["used"][1])


def test_gnn_loss_gives_no_gradient_to_the_predictors(world):
    """Between syncs the GNN's backward runs every step; the predictors' gradients and
    parameters stay as the last sync's update left them (a gradient from the GNN loss would
    accumulate into .grad)."""
    ranks = world.ranks
    for r in ranks:
        steps = r["sat"]
        assert all(g is None for g in steps[0]["pgrads"])  # before any sync: never touched
        for t in range(I, 2 * I - 1):  # steps after the first sync, before the second
            assert same(steps[t]["pgrads"], steps[I - 1]["pgrads"])
            assert same(steps[t]["pparams"], steps[I - 1]["pparams"])
        assert not same(steps[2 * I - 1]["pparams"], steps[I - 1]["pparams"])  # a sync updates


def test_shared_predictors_stay_equal_and_their_bytes_are_counted(world):
    ranks = world.ranks
    numel = sum(p.numel() for p in ranks[0]["shared"][0]["pparams"])
    for t in (I - 1, 2 * I - 1):
        for r in ranks[1:]:
            assert same(r["shared"][t]["pparams"], ranks[0]["shared"][t]["pparams"])
        for r in ranks:
            extra = r["shared"][t]["bytes_params"] - r["digest"][t]["bytes_params"]
            assert extra == 2 * (WORKERS - 1) * numel * 4 // WORKERS
    assert not same(ranks[0]["sat"][2 * I - 1]["pparams"], ranks[1]["sat"][2 * I - 1]["pparams"])


def test_gate(world):
    """The guard (the default): a layer whose prediction error at a sync exceeded the staleness
    error reads the store rows until the next sync; the error of the rows a sync step read is
    the prediction's when it read the prediction, the store rows' otherwise; the count runs."""
    ranks = world.ranks
    for r in ranks:
        steps, closings = r["gate"], 0
        for sync in (I - 1, 2 * I - 1):
            for l in (1, 2):
                closed = steps[sync][f"sat_gate_l{l}"]
                pred, stale = steps[sync][f"pred_err_l{l}"], steps[sync][f"stale_err_l{l}"]
                assert closed == int(pred > stale)
                closings += closed
                read = steps[sync][f"sat_used_l{l}"]
                assert steps[sync][f"served_err_l{l}"] == (pred if read else stale)
                for t in range(sync + 1, min(sync + 1 + I, STEPS)):
                    assert steps[t][f"sat_used_l{l}"] == 1 - closed
            assert steps[sync]["sat_gate_closed"] == closings
        assert "sat_gate_l1" not in r["sat"][I - 1] and "sat_gate_closed" not in r["sat"][I - 1]


def test_guard_serves_the_store_rows_when_the_predictor_is_bad(world):
    """A predictor trained at lr 1000 predicts far worse than the store rows at every sync: the
    guard closes every layer at every sync, so every step reads the store rows, the run is
    DIGEST's step for step (the first sync already closes it, before any prediction is read),
    and the rows served at a sync have exactly the staleness error. Without the guard the same
    predictor's rows are read, their error is the prediction's, and the run leaves DIGEST's."""
    ranks = world.ranks
    syncs = [t for t in range(STEPS) if (t + 1) % I == 0]
    for r in ranks:
        on, off = r["bad"], r["bad-off"]
        for n, t in enumerate(syncs, 1):
            for l in (1, 2):
                assert on[t][f"pred_err_l{l}"] > on[t][f"stale_err_l{l}"]
                assert on[t][f"sat_gate_l{l}"] == 1
                assert on[t][f"served_err_l{l}"] == on[t][f"stale_err_l{l}"]
            assert on[t]["sat_gate_closed"] == 2 * n
        for a, b in zip(on, r["digest"]):
            assert a["loss"] == b["loss"] and same(a["grads"], b["grads"])
            assert all(torch.equal(a["used"][l], b["used"][l]) for l in (1, 2))  # store rows
            assert a["sat_used_l1"] == a["sat_used_l2"] == 0
        assert [s["sat_used_l1"] for s in off] == [0] * I + [1] * (STEPS - I)
        t = 2 * I - 1  # the second sync read the first update's prediction
        for l in (1, 2):
            assert off[t][f"served_err_l{l}"] == off[t][f"pred_err_l{l}"] > off[t][f"stale_err_l{l}"]
            assert not torch.equal(off[t]["used"][l], r["digest"][t]["used"][l])
        assert [s["loss"] for s in off[I:]] != [s["loss"] for s in r["digest"][I:]]


# -- the command line -----------------------------------------------------------------------------

def test_resume_continues_identically(world):
    """Predictors, their optimiser, windows, kept pairs and flags are checkpointed: a run stopped
    after step 4 and restored into a new trainer continues as the direct run (dropout on)."""
    ranks = world.ranks
    for r in ranks:
        assert r["resumed"] == [s["loss"] for s in r["direct"]]
        assert r["resumed-sync"] == [s["loss"] for s in r["direct-sync"]]


def test_window_mean_of_sync_snapshots_averages_the_refreshes(world):
    """--sat-predictor mean with sync snapshots: the second sync's step reads the mean of the
    fill's rows and the first sync's (the window's two snapshots), learned nothing."""
    ranks = world.ranks
    for r in ranks:
        steps = r["sync-mean"]
        for l in (1, 2):
            want = (steps[0]["store"][l] + steps[I - 1]["store"][l]) / 2
            assert torch.allclose(steps[2 * I - 1]["used"][l], want, atol=1e-6)
        assert all(s["sat_loss"] is None for s in steps)


def test_sync_snapshots_read_the_line_from_the_store_rows_to_the_prediction(world):
    """--sat-snapshots sync: after the sync at s, step s + k reads store + (k / I) (next - store),
    where next (the prediction of the sync at s + I) is what the sync step reads in full; its
    error against the rows that sync brings is pred_err. Before the first update: DIGEST."""
    ranks = world.ranks
    for r in ranks:
        steps = r["sync"]
        assert [s["sat_used_l1"] for s in steps] == [0] * I + [1] * (STEPS - I)
        s = I - 1  # the first sync: the first update (3 Adam steps) on the fill's window
        assert steps[s]["sat_loss"] > 0 and "pred_err_l1" not in steps[s]
        for l in (1, 2):
            store, nxt = steps[s]["store"][l], steps[s + I]["used"][l]
            for k in range(1, I):
                assert torch.equal(steps[s + k]["store"][l], store)  # no sync in between
                want = torch.lerp(store, nxt, k / I)
                assert torch.allclose(steps[s + k]["used"][l], want, atol=1e-6)
            assert not torch.equal(nxt, store)  # trained: a correction to the store rows
            fresh = steps[s + I]["store"][l]
            err = float((nxt - fresh).norm() / fresh.norm())
            assert steps[s + I][f"pred_err_l{l}"] == pytest.approx(err, rel=1e-5)
            assert steps[s + I][f"stale_err_l{l}"] == pytest.approx(
                float((store - fresh).norm() / fresh.norm()), rel=1e-5)


@pytest.mark.parametrize("flags,message", [
    (["--sat-window", "0"], "error: --sat-window must be >= 1"),
    (["--sat-lr", "0"], "error: --sat-lr must be > 0"),
    (["--sat-replay", "0"], "error: --sat-replay must be >= 1"),
    (["--sat-steps", "0"], "error: --sat-steps must be >= 1"),
    (["--sync-interval", "0"], "error: --sync-interval must be >= 1"),
])
def test_bad_values_are_one_line(flags, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DIGEST_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    rc, err = here(["train", "--method", "sat", *flags, "--out", tmp_path / "run"], capsys)
    assert rc == 2 and err == [message]
    assert not (tmp_path / "run").exists()

