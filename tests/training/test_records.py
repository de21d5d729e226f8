"""Metric rows (digest/training/records.py): one row per synchronous epoch and per DIGEST-A server epoch
from the workers' step records, built by the same ``combine``."""
from __future__ import annotations

import pytest

from digest.training.records import async_summary, combine, server_epochs


def test_a_synchronous_epoch_row():
    per = [{"time": 1.0, "loss": 0.5, "cpu_time": 0.7, "comm_time": 0.25, "bytes_halo_fwd": 10,
            "bytes_total": 10, "messages": 1, "peak_mem_mb": 5.0, "comp_ratio": 4.0},
           {"time": 0.8, "loss": 0.25, "cpu_time": 0.5, "comm_time": 0.5, "bytes_halo_fwd": 30,
            "bytes_total": 30, "messages": 3, "peak_mem_mb": 7.0, "comp_ratio": 2.0}]
    row = combine([[w] for w in per])
    assert row["comm_time"] == 0.5 and row["compute_time"] == 0.75 and row["peak_mem_mb"] == 7.0
    assert row["bytes_halo_fwd"] == 40 and row["messages"] == 4 and row["comp_ratio"] == 3.0
    assert (row["compute_time_w0"], row["compute_time_w1"]) == (0.75, pytest.approx(0.3))
    assert (row["cpu_time_w0"], row["cpu_time_w1"], row["bytes_w1"]) == (0.7, 0.5, 30)
    assert "slept_w0" not in row and "time" not in row and "loss" not in row


def _step(version, loss, t_end, time_=0.1, comm_=0.02, bytes_=100, slept=0.0):
    return {"time": time_, "loss": loss, "comm_time": comm_, "bytes_params": bytes_,
            "bytes_store": 0, "bytes_total": bytes_, "messages": 2, "peak_mem_mb": 10.0,
            "staleness_repr": 1.0, "staleness_repr_max": 2, "store_syncs": 0,
            "staleness_param": version % 2, "param_version": version, "slept": slept,
            "t_end": t_end}


def test_rows_are_server_epochs_and_the_pace_is_per_worker():
    """M = 2, budget 6 (3 server epochs): worker 0 (fast) applied versions 1, 2, 4, 5, worker 1
    (3x slow) versions 3, 6; the rows are the server epochs, whoever supplied the gradients."""
    w0 = [_step(v, loss, t) for v, loss, t in [(1, 1.0, 1), (2, 0.9, 2), (4, 0.8, 3), (5, 0.7, 4)]]
    w1 = [_step(v, loss, t, slept=0.2) for v, loss, t in [(3, 2.0, 3), (6, 1.5, 6)]]
    everyone = [{"rows": w0, "loop_time": 5.0, "discarded": 1, "factor": 1.0},
                {"rows": w1, "loop_time": 6.0, "discarded": 0, "factor": 3.0}]
    times = [1.0, 2.0, 3.0, 3.1, 4.0, 6.0]  # server clock of versions 1..6
    evals = {2: {"val_acc": 0.5, "test_acc": 0.4, "server_wall_time": 3.1},
             3: {"val_acc": 0.6, "test_acc": 0.55, "server_wall_time": 6.0}}
    rows = server_epochs(everyone, evals, times, 2)
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    assert [r["wall_time"] for r in rows] == [2.0, 3.1, 6.0]  # when version 2e was applied
    assert [r["epoch_time"] for r in rows] == pytest.approx([2.0, 1.1, 2.9])
    assert [(r["steps_w0"], r["steps_w1"]) for r in rows] == [(2, 0), (1, 1), (1, 1)]
    assert [(r["steps_done_w0"], r["steps_done_w1"]) for r in rows] == [(2, 0), (3, 1), (4, 2)]
    # latest loss of each worker (worker 1's first until it has one applied)
    assert [r["train_loss"] for r in rows] == pytest.approx([0.9 + 2.0, 0.8 + 2.0, 0.7 + 1.5])
    assert [r["bytes_total"] for r in rows] == [200, 200, 200] and rows[-1]["cum_bytes"] == 600
    assert "val_acc" not in rows[0] and rows[1]["val_acc"] == 0.5 and rows[2]["test_acc"] == 0.55
    assert rows[0]["slept_w1"] == 0 and rows[1]["slept_w1"] == pytest.approx(0.2)
    assert rows[0]["compute_time_w1"] == 0 and rows[0]["compute_time_w0"] == pytest.approx(0.16)
    s = async_summary(everyone, rows)
    assert s["steps_by_worker"] == [4, 2] and s["server_versions"] == 6
    assert s["grad_share_by_worker"] == pytest.approx([4 / 6, 2 / 6])
    assert s["train_time_by_worker"] == [4, 6] and s["steps_per_s_by_worker"] == [1.0, 2 / 6]
    assert s["steps_per_s_fast"] == 1.0 and s["steps_per_s_slow"] == pytest.approx(1 / 3)
    assert s["train_wall_time"] == 6.0 and s["server_epochs_per_s"] == 0.5
    assert s["discarded_by_worker"] == [1, 0] and s["staleness_repr_max"] == 2
    assert s["staleness_param_max_by_worker"] == [1, 1]


