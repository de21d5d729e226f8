"""The run record's schema (digest/training/record.py): the column families are made and read back
without regular expressions, and every column and summary key the writers produce is named there."""
from __future__ import annotations

from digest.training import record
from digest.training.records import (accumulate, async_summary, combine, server_epochs, summary,
                                     sync_pace)


def test_per_worker_columns_round_trip():
    assert record.per_worker("bytes", 3) == "bytes_w3"
    cols = ["cpu_time_w1", "cpu_time_w0", "bytes_w0", "cpu_time_w", "cpu_time_wx", "cpu_time_w12",
            "x_cpu_time_w2", "staleness_repr_max_w5"]
    assert record.worker_ranks(cols, "cpu_time") == [0, 1, 12]
    assert record.worker_ranks(cols, "staleness_repr") == []  # not staleness_repr_max's
    assert record.split_worker("staleness_repr_max_w5") == ("staleness_repr_max", 5)
    assert [c for c in cols if record.is_per_worker(c)] == [
        "cpu_time_w1", "cpu_time_w0", "bytes_w0", "cpu_time_w12", "x_cpu_time_w2",
        "staleness_repr_max_w5"]
    assert not record.is_per_worker("bytes_halo_fwd") and not record.is_per_worker("w3")


def test_layer_and_byte_columns():
    assert record.per_layer("stale_err", 1) == "stale_err_l1"
    assert record.layer_of("pred_err_l2", "pred_err") == 2
    assert record.layer_of("pred_err_lx", "pred_err") is None
    errors = ["stale_err_l0", "pred_err_l1", "served_err_l12", "sat_used_l1", "xstale_err_l1",
              "stale_err_l"]
    assert [c for c in errors if record.is_error(c)] == errors[:3]
    cols = ["epoch", "bytes_halo_fwd", "bytes_total", "bytes_w0", "messages"]
    assert record.byte_columns(cols) == ["bytes_halo_fwd", "bytes_total"]
    assert record.bytes_of("store") == "bytes_store"


def _known(key: str) -> bool:
    named = {*record.COLUMNS, *record.SUMMARY, *record.RUN}
    split = record.split_worker(key)
    return (key in named or (split is not None and split[0] in record.PER_WORKER)
            or record.is_bytes(key)
            or (key.endswith("_by_worker") and key.removesuffix("_by_worker") in named))


def test_every_key_the_writers_produce_is_named():
    step = {"time": 1.0, "loss": 0.5, "cpu_time": 0.7, "comm_time": 0.25, "bytes_halo_fwd": 10,
            "bytes_total": 10, "messages": 1, "peak_mem_mb": 5.0, "slept": 0.0}
    row = {"epoch": 0, "train_loss": 0.5, "epoch_time": 1.0, **combine([[step], [step]]),
           "val_acc": 0.5, "train_acc": 0.5, "test_acc": 0.5, "eval_time": 0.1}
    rows = [accumulate(row, None)]
    out = {**summary(rows), **sync_pace(rows, "", 2)}
    assert [k for k in row if not _known(k)] == []
    assert [k for k in out if not _known(k)] == []
    assert out["bytes_by_category"] == {"bytes_halo_fwd": 20, "bytes_total": 20}
    a = {"time": 0.1, "loss": 1.0, "comm_time": 0.0, "bytes_total": 1, "messages": 1,
         "peak_mem_mb": 1.0, "staleness_repr": 1.0, "staleness_repr_max": 2, "store_syncs": 0,
         "staleness_param": 0, "param_version": 1, "slept": 0.0, "t_end": 1.0}
    everyone = [{"rows": [a], "loop_time": 1.0, "discarded": 0, "factor": 1.0}]
    rows = server_epochs(everyone, {1: {"val_acc": 0.5, "server_version": 1,
                                        "server_wall_time": 1.0}}, [1.0], 1)
    assert [k for k in rows[0] if not _known(k)] == []
    assert [k for k in async_summary(everyone, rows) if not _known(k)] == []
