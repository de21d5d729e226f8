"""experiments/analysis/method_state.py: each method's own metrics columns and peak memory, side by side.
Hand-made run folders (test_experiments.write_run), exact expected values, no training."""
from __future__ import annotations

import json

import pandas as pd

from experiments import tables
from experiments.analysis import method_state, tables as frames
from experiments.render import method_state as state_render, report
from experiments.suites.load import load
from fake_runs import write_run


def add(d, columns: dict, peak=None):
    """Give a written run extra metrics columns (one value per epoch) and a peak memory."""
    m = pd.read_csv(d / "metrics.csv")
    for c, v in columns.items():
        m[c] = v
    m.to_csv(d / "metrics.csv", index=False)
    if peak is not None:
        s = json.loads((d / "summary.json").read_text())
        s["peak_mem_mb_max"] = peak
        (d / "summary.json").write_text(json.dumps(s))


def test_state_is_the_method_columns_mean_over_epochs_then_seeds(tmp_path):
    root = tmp_path / "runs"
    add(write_run(root, "exact", 2, 0, [.1] * 3, [.5, .6, .7]), {"peak_mem_mb": 9, "train_acc": .9},
        peak=100)
    add(write_run(root, "sancus", 2, 0, [.1] * 3, [.5, .6, .7]),
        {"sent_fraction": [1, .5, .3], "staleness_repr": [0, 1, 2]}, peak=110)
    add(write_run(root, "sancus", 2, 1, [.1] * 3, [.5, .6, .7]),
        {"sent_fraction": [1, .5, .6], "staleness_repr": [0, 0, 0]}, peak=130)
    # a running count is its last value; epochs without a value (a DIGEST sync's error) are
    # skipped; an error is also averaged over the second half of the epochs (epochs 1 and 2 of 0-2)
    add(write_run(root, "digest", 2, 0, [.1] * 3, [.5, .6, .7]),
        {"store_syncs": [1, 1, 2], "stale_err_l1": [.6, None, .2]})
    assert method_state.state_columns(pd.read_csv(root / "toy" / "digest_w2_s0" / "metrics.csv")) \
        == ["store_syncs", "stale_err_l1"]  # not bytes_*, *_w<k>, accuracies, times, memory
    t = method_state.table(load(root)).set_index("method")
    assert t.loc["exact", "state"] == "" and t.loc["exact", "peak_mem_mb"] == 100
    # sent_fraction: seed 0 mean 0.6, seed 1 0.7 -> 0.65; staleness 1 and 0 -> 0.5
    assert t.loc["sancus", "state"] == "sent_fraction 0.65; staleness_repr 0.5"
    assert t.loc["sancus", "seeds"] == 2 and t.loc["sancus", "peak_mem_mb"] == 120
    assert t.loc["digest", "state"] == \
        "store_syncs total 2; stale_err_l1 0.4; stale_err_l1 2nd half 0.2"
    assert t.loc["digest", "peak_mem_mb"] != t.loc["digest", "peak_mem_mb"]  # none recorded: NaN
    md = state_render.section(method_state.table(load(root)))
    assert "| sancus | 2 | 2 | 120 | sent_fraction 0.65; staleness_repr 0.5 |" in md
    assert "| exact | 2 | 1 | 100 | – |" in md and "| digest | 2 | 1 | n/a |" in md
    built = frames.build(load(root))
    assert "method_state" in built and "method state" in report.markdown(
        load(root), built, None, 0.98, "x")


def test_an_asynchronous_run_shows_each_workers_share_and_staleness(tmp_path):
    """summary.json's per-worker lists, mean over seeds worker by worker: the co-located worker's
    lead (docs/digest-a.md) is read from the table, not from the raw files."""
    root = tmp_path / "runs"
    for seed, share, stale in ((0, [.8, .1, .1, 0], [0, 17, 19, None]),
                               (1, [.9, 0, .1, 0], [1, 16, 18, 20])):
        d = write_run(root, "digest-async", 4, seed, [.1] * 3, [.5, .6, .7])
        s = json.loads((d / "summary.json").read_text())
        s.update(grad_share_by_worker=share, staleness_param_mean_by_worker=stale)
        (d / "summary.json").write_text(json.dumps(s))
    write_run(root, "exact", 4, 0, [.1] * 3, [.5, .6, .7])
    t = method_state.table(load(root)).set_index("method")
    assert t.loc["digest-async", "state"] == ("grad share by worker 0.85/0.05/0.10/0.00; "
                                              "staleness_param by worker 0.5/16.5/18.5/20.0")
    assert t.loc["exact", "state"] == ""  # a synchronous run has no such lists
