"""DIGEST-A (digest/asynchronous.py): the server's bookkeeping, M = 1 equivalence with synchronous
DIGEST, and real asynchronous runs over torch.distributed.rpc with a 3x slower worker."""
from __future__ import annotations

import csv
import json
import time

import pytest
import torch

from digest.asynchronous import (AsyncTrainer, ParameterServer, Straggler, parse_slow_workers,
                                 snapshot_epochs)
from digest.cache import prepare_partition
from digest.config import TrainConfig
from digest.launch import WorkerFailed
from digest.synthetic import make_synthetic
from digest.trainer import Trainer
from distributed import run_workers

CHANCE = 1 / 8  # make_synthetic's default 8 classes


# -- no processes ------------------------------------------------------------------------------------
def test_parse_slow_workers():
    assert parse_slow_workers("", 4) == {}
    assert parse_slow_workers("1:3, 3:1.5", 4) == {1: 3.0, 3: 1.5}
    for bad in ("1", "x:2", "4:2", "-1:2", "1:0.5"):
        with pytest.raises(ValueError, match="--slow-workers"):
            parse_slow_workers(bad, 4)


def test_snapshot_epochs_keep_the_last_and_are_capped():
    assert snapshot_epochs(10, 1) == list(range(1, 11))
    assert snapshot_epochs(10, 4) == [4, 8, 10]
    eps = snapshot_epochs(1000, 1, cap=50)
    assert len(eps) == 50 and eps[0] == 1 and eps[-1] == 1000 and eps == sorted(set(eps))


def test_straggler_sleeps_factor_minus_one_times_compute():
    assert Straggler(1.0)(0.05) == 0.0
    t0 = time.perf_counter()
    assert Straggler(3.0)(0.02) == pytest.approx(0.04)
    assert time.perf_counter() - t0 >= 0.04


def test_server_counts_version_lag_and_serves_only_newer_blocks():
    cfg = TrainConfig(lr=0.1)
    model = torch.nn.Linear(3, 2)
    srv = ParameterServer(model.parameters(), cfg, world=2, snapshot_versions=[2])
    g = torch.ones(sum(p.numel() for p in model.parameters()))
    flat0, v, steps, lag = srv.push_grads(0, 0, g)  # worker 0 computed on version 0
    assert (v, steps, lag) == (1, [1, 0], 0)
    _, v, steps, lag = srv.push_grads(1, 0, g)  # worker 1 also on version 0: one update missed
    assert (v, steps, lag) == (2, [1, 1], 1)
    assert 2 in srv.snapshots and srv.snapshot(2)[1].numel() == g.numel()
    flat0.zero_()  # what a caller gets is a copy, not the server's parameters
    assert srv.params[0].abs().sum() > 0
    # rows: owner 0 sends 2 rows to worker 1 (none to itself), tagged with its step count
    srv.push_rows(0, 5, torch.arange(8.).view(2, 4), [0, 2])
    got = srv.pull_rows(1, known=[0, 0])
    assert got[1] is None and got[0][1] == 5 and torch.equal(got[0][0], torch.arange(8.).view(2, 4))
    assert srv.pull_rows(1, known=[5, 0]) == [None, None]  # nothing newer than what it holds
    assert srv.pull_rows(0, known=[0, 0]) == [None, None]


# -- real worker processes -------------------------------------------------------------------------
def _graph():
    return make_synthetic(nodes=400, seed=1)


def losses_of(cfg, rt, part, method):
    trainer = (AsyncTrainer if method == "digest-async" else Trainer)(cfg, rt, part)
    if method == "digest-async":  # the async loop, then read its losses back from its rows
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory() as d:
            trainer.fit(Path(d), {})
            return [r["train_loss"] for r in trainer.rows], trainer.evaluate()
    losses = [trainer.step(e) for e in range(cfg.epochs)]
    return losses, trainer.evaluate()


def test_one_worker_async_is_synchronous_digest(tmp_path):
    part_dir = prepare_partition("asy1", 1, "metis", 0, tmp_path, graph=_graph())
    out = {}
    for method in ("digest", "digest-async"):
        cfg = TrainConfig(dataset="asy1", method=method, hidden=8, epochs=6, sync_interval=2,
                          progress=False, timeout=60)
        out[method] = run_workers(losses_of, cfg, part_dir, 1, method=method)[0]
    assert out["digest-async"][0] == pytest.approx(out["digest"][0], rel=1e-6)
    assert out["digest-async"][1] == out["digest"][1]


def fit_async(cfg, rt, part, out_dir):
    from pathlib import Path
    return AsyncTrainer(cfg, rt, part).fit(Path(out_dir), {"note": "test"})


def test_async_with_a_3x_slower_worker_finishes_and_the_fast_ones_run_ahead(tmp_path):
    world, epochs = 3, 100
    part_dir = prepare_partition("asy3", world, "metis", 0, tmp_path, graph=_graph())
    cfg = TrainConfig(dataset="asy3", method="digest-async", hidden=32, epochs=epochs,
                      sync_interval=3, eval_every=5, slow_workers="1:3", progress=False,
                      timeout=60)  # a lost peer or a hang becomes an error within a minute
    t0 = time.perf_counter()
    summary = run_workers(fit_async, cfg, part_dir, world, out_dir=str(tmp_path / "run"))[0]
    assert time.perf_counter() - t0 < 180  # no deadlock (start-up included)

    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["status"] == "complete" and saved["note"] == "test"
    assert saved["epochs"] == epochs and saved["server_versions"] == world * epochs
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert len(rows) == epochs
    for col in ("staleness_param", "staleness_repr", "staleness_param_w2", "staleness_repr_w0",
                "bytes_params", "bytes_store", "epoch_time_w1", "val_acc", "wall_time"):
        assert col in rows[0], col

    rate = summary["steps_per_s_by_worker"]
    assert rate[1] < rate[0] and rate[1] < rate[2], rate  # the straggler is the slowest
    assert summary["steps_per_s_fast"] > summary["steps_per_s_slow"]
    assert sum(float(r["slept_w1"]) for r in rows) > 0 and all(float(r["slept_w0"]) == 0 for r in rows)
    # the fast workers saw staleness: updates of others between their pull and push, or halo
    # rows that are steps old in their owners' clocks
    for r in (0, 2):
        assert summary["staleness_param_mean_by_worker"][r] > 0 or \
            summary["staleness_repr_mean_by_worker"][r] > 0, r
    # the straggler's gradients arrive late: the fast ones updated in between
    assert summary["staleness_param_mean_by_worker"][1] > 0
    # rpc traffic is counted: rank 0 talks to itself (free), the others pay for params and store
    assert all(int(r["bytes_w0"]) == 0 for r in rows)
    assert sum(int(r["bytes_params"]) for r in rows) > 0 and sum(int(r["bytes_store"]) for r in rows) > 0
    # evaluated (exact collective inference of the server's snapshots), well above chance
    # (seen on this graph: 0.80-0.95 at best validation, 0.66-0.86 at the end; chance 0.125)
    assert summary["test_at_best_val"] > CHANCE + 0.4, summary["test_at_best_val"]
    assert summary["final"]["test_acc"] > CHANCE + 0.25, summary["final"]


class FailingAsync(AsyncTrainer):
    fail_rank = 1

    def step(self, epoch):
        if self.rt.rank == self.fail_rank and epoch == 3:
            raise RuntimeError("injected failure")
        return super().step(epoch)


def fit_failing(cfg, rt, part, out_dir, fail_rank):
    from pathlib import Path
    trainer = FailingAsync(cfg, rt, part)
    trainer.fail_rank = fail_rank
    return trainer.fit(Path(out_dir), {})


@pytest.mark.parametrize("fail_rank", [0, 1], ids=["server-rank-dies", "worker-dies"])
def test_a_rank_dying_mid_training_is_an_error_not_a_hang(tmp_path, fail_rank):
    """Rank 0 (server) dying: the others' rpc calls fail as a lost peer. Rank 1 dying: rank 0
    trains on alone (the slow rank is the one that dies), then the launcher stops it."""
    part_dir = prepare_partition("asyf", 2, "metis", 0, tmp_path, graph=_graph())
    cfg = TrainConfig(dataset="asyf", method="digest-async", hidden=8, epochs=200,
                      sync_interval=2, slow_workers=f"{fail_rank}:2", progress=False, timeout=30)
    t0 = time.perf_counter()
    with pytest.raises(WorkerFailed, match=f"lost worker rank {fail_rank} "):
        run_workers(fit_failing, cfg, part_dir, 2, out_dir=str(tmp_path / "run"),
                    fail_rank=fail_rank)
    assert time.perf_counter() - t0 < 120  # well under the 30 s timeouts plus start-up
    assert not (tmp_path / "run" / "summary.json").exists()
