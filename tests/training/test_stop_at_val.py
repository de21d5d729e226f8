"""``--stop-at-val`` (digest/training/trainer.py): a run stops after the first evaluation that
reaches the target, and what it trained up to there is the full budget's run, schedules scaled to
``--epochs`` included (VARCO's ratio), row for row, also for a method with steps of its own
(mini-batch); DIGEST-A, whose outer loop is its own, refuses it in one line."""
from __future__ import annotations

import json

import pytest

from helpers import DATASET, here, metrics_of

FLAGS = ["--dataset", DATASET, "--workers", 2, "--hidden", 16, "--epochs", 40, "--no-progress"]


@pytest.mark.parametrize("method", ["exact", "varco", "minibatch"])  # minibatch: its own steps
def test_a_run_stops_at_the_target_as_the_budgets_run_was_there(tmp_path, capsys, data_root,
                                                                  method):
    full, stopped = tmp_path / "full", tmp_path / "stopped"
    assert here(["train", *FLAGS, "--method", method, "--out", full], capsys)[0] == 0
    rows = metrics_of(full / "metrics.csv")
    vals = [float(r[3]) for r in rows]  # val_acc, evaluated every epoch
    target = sorted(set(vals))[len(set(vals)) // 2]  # a value the run reaches mid-way
    first = vals.index(next(v for v in vals if v >= target))
    assert 0 < first < 39
    rc, err = here(["train", *FLAGS, "--method", method, "--stop-at-val", target,
                    "--out", stopped], capsys)
    assert rc == 0, err
    assert metrics_of(stopped / "metrics.csv") == rows[:first + 1]
    summary = json.loads((stopped / "summary.json").read_text())
    assert summary["epochs"] == first + 1 and summary["status"] == "complete"


def test_digest_a_refuses_it_in_one_line(tmp_path, capsys, data_root):
    rc, err = here(["train", *FLAGS, "--method", "digest-async", "--stop-at-val", 0.5,
                    "--out", tmp_path / "run"], capsys)
    assert rc == 2 and err == ["error: --stop-at-val: digest-async evaluates its snapshots after "
                               "the run (asynchronous); give --epochs"]
