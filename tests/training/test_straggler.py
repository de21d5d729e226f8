"""Emulated stragglers (``--slow-workers RANK:FACTOR``, digest/training/straggler.py): the flag's
format and ranks, the sleep rule, and the synchronous loop's waiting for the slow worker (DIGEST-A's
stragglers: tests/asynchronous/test_async_runs.py)."""
from __future__ import annotations

import csv

import pytest

from digest.config import TrainConfig
from digest.data.cache import prepare_partition
from digest.data.synthetic import make_synthetic
from digest.training.straggler import Straggler, parse_slow_workers
from digest.training.trainer import Trainer
from helpers import run_workers


def test_parse_slow_workers():
    assert parse_slow_workers("", 4) == {}
    assert parse_slow_workers("1:3, 3:1.5", 4) == {1: 3.0, 3: 1.5}
    for bad in ("1", "x:2", "4:2", "-1:2", "1:0.5"):
        with pytest.raises(ValueError, match="--slow-workers"):
            parse_slow_workers(bad, 4)


def test_slow_workers_are_checked_with_the_other_flags(monkeypatch):
    from digest.config import validate
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    validate(TrainConfig.of(workers=4, slow_workers="3:3"))
    for bad, why in [("3:3", "rank 3 is outside 0..1"), ("1:x", "is not RANK:FACTOR"),
                     ("1:0.5", "must be >= 1")]:
        with pytest.raises(ValueError, match=why):
            validate(TrainConfig.of(workers=2, slow_workers=bad))


def test_straggler_sleeps_factor_minus_one_times_compute(monkeypatch):
    from types import SimpleNamespace

    import digest.training.straggler as straggler
    slept = []
    monkeypatch.setattr(straggler, "time", SimpleNamespace(sleep=slept.append))
    assert Straggler(1.0)(0.05) == 0.0 and slept == []  # factor 1: no sleep at all
    assert Straggler.of("1:3", 2, 1).factor == 3.0 and Straggler.of("1:3", 2, 0).factor == 1.0
    assert Straggler(3.0)(0.02) == pytest.approx(0.04) and slept == [pytest.approx(0.04)]


def _graph():
    return make_synthetic(nodes=400, seed=1)  # its defaults: 8 classes


# -- --slow-workers under the synchronous loop -----------------------------------------------------
def fit_sync(cfg, rt, part, out_dir):
    from pathlib import Path
    return Trainer(cfg, rt, part).fit(Path(out_dir), {})


def test_a_slow_worker_slows_synchronous_training_and_its_sleep_is_in_epoch_time(tmp_path):
    """Synchronous DIGEST with rank 1 3x slower: rank 1 sleeps 2x its compute time after every
    step, everyone waits for it, and the sleep is inside the step's (the slowest worker's) time."""
    world, epochs = 2, 8
    part_dir = prepare_partition("slow2", world, "metis", 0, tmp_path, graph=_graph())
    cfg = TrainConfig.of(dataset="slow2", method="digest", hidden=16, epochs=epochs, sync_interval=3,
                      eval_every=4, slow_workers="1:3", progress=False, timeout=60)
    summary = run_workers(fit_sync, cfg, part_dir, world, out_dir=str(tmp_path / "run"))[0]
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert len(rows) == epochs
    for r in rows:
        assert float(r["slept_w0"]) == 0 and float(r["slept_w1"]) > 0
        # rank 1's compute time counts its sleep (it emulates a slower machine): its own
        # compute c plus 2c of sleep (time.sleep may overshoot, never undershoot)
        compute1, slept1 = float(r["compute_time_w1"]), float(r["slept_w1"])
        assert slept1 <= 2 * (compute1 - slept1) + 1e-9
        assert float(r["epoch_time"]) >= compute1  # the sleep is inside the step's time
    # every worker takes every step: the same pace for all, epochs / total training time
    rate = epochs / summary["total_train_time"]
    assert summary["steps_per_s_by_worker"] == pytest.approx([rate, rate])
    assert summary["steps_per_s_fast"] == summary["steps_per_s_slow"] == pytest.approx(rate)
    assert summary["slow_factor_by_worker"] == [1.0, 3.0] and summary["steps_by_worker"] == [8, 8]


