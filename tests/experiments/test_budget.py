"""Accuracy by budget (experiments/analysis/budget.py, experiments/render/budget.py) on hand-made
records: the OGB protocol on each run's first B epochs, the difference from exact paired by seed,
and whether exact converged within each budget."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from experiments.analysis.budget import best_within, table
from experiments.render.budget import section
from experiments.suites.load import Loaded, RunRecord
from experiments.suites.suite import suite_from_dict


def _record(label: str, seed: int, val: list, test: list) -> RunRecord:
    metrics = pd.DataFrame({"epoch": range(len(val)), "val_acc": val, "test_acc": test})
    return RunRecord("g", label, label, 4, seed, Path("."), {}, metrics)


def test_best_within_reads_only_the_first_epochs_and_the_first_best_wins():
    m = pd.DataFrame({"epoch": range(5), "val_acc": [0.5, 0.7, 0.7, float("nan"), 0.9],
                      "test_acc": [0.4, 0.6, 0.65, 0.1, 0.8]})
    # epochs counted from 1, as the verdict counts them
    assert best_within(m, 1) == (0.4, 1)
    assert best_within(m, 4) == (0.6, 2)   # epoch 2 ties epoch 1: the first best wins
    assert best_within(m, 5) == (0.8, 5)
    assert best_within(m.iloc[3:4], 5) is None  # nothing evaluated


def test_loss_by_budget_is_paired_by_seed_and_says_whether_exact_converged():
    # exact keeps improving (its best is the 4th epoch of 4 at seed 0); partition peaks at the 2nd
    recs = [_record("exact", 0, [0.5, 0.6, 0.7, 0.8], [0.50, 0.60, 0.70, 0.80]),
            _record("exact", 1, [0.5, 0.9, 0.6, 0.6], [0.55, 0.85, 0.60, 0.60]),
            _record("partition", 0, [0.5, 0.7, 0.6, 0.6], [0.52, 0.66, 0.60, 0.60]),
            _record("partition", 1, [0.5, 0.8, 0.6, 0.6], [0.50, 0.75, 0.60, 0.60])]
    t = table(Loaded(recs, ["g"], ["exact", "partition"], budgets=(2, 4)))
    p2 = t[(t["method"] == "partition") & (t["budget"] == 2)].iloc[0]
    p4 = t[(t["method"] == "partition") & (t["budget"] == 4)].iloc[0]
    # at 2 epochs: exact 0.60 / 0.85, partition 0.66 / 0.75 -> +0.06, -0.10
    assert p2["diff_vs_exact"] == pytest.approx(-0.02) and p2["diff_min"] == pytest.approx(-0.10)
    # at 4 epochs exact's seed 0 reaches 0.80: partition -0.14 and -0.10
    assert p4["diff_vs_exact"] == pytest.approx(-0.12) and p4["diff_max"] == pytest.approx(-0.10)
    e2 = t[(t["method"] == "exact") & (t["budget"] == 2)].iloc[0]
    assert e2["best_epoch_max"] == 2 and not e2["converged"]   # 2 > 0.8 x 2
    e4 = t[(t["method"] == "exact") & (t["budget"] == 4)].iloc[0]
    assert e4["best_epoch_max"] == 4 and not e4["converged"]   # 4 > 0.8 x 4
    # at 3 epochs seed 1's best (the 2nd) is within 0.8 x 3 but seed 0's (the 3rd) is not
    t3 = table(Loaded(recs, ["g"], ["exact", "partition"], budgets=(3,)))
    assert not t3["converged"].any()
    t5 = table(Loaded([_record("exact", 0, [0.5, 0.9, 0.6, 0.6, 0.6], [0.5] * 5)], ["g"],
                      ["exact"], budgets=(5,)))
    assert t5["converged"].all()  # the 2nd epoch of 5
    text = section(t, 7)
    assert text.startswith("\n## 7. Accuracy by budget: test accuracy (%) at best validation "
                           "within the first 2, 4 epochs")
    assert "| partition | 4 | 2 | 70.50 ± 6.36 (-2.00 [-10.00, +6.00]) |" in text
    assert "| exact | 4 | 2 | 72.50 ± 17.68 |" in text  # the reference: no difference from itself


def test_a_run_shorter_than_a_budget_is_left_out_of_it():
    recs = [_record("exact", 0, [0.5, 0.6], [0.5, 0.6])]
    t = table(Loaded(recs, ["g"], ["exact"], budgets=(2, 3)))
    assert list(t["budget"]) == [2]
    assert section(table(Loaded(recs, ["g"], ["exact"])), 7) == ""  # no budgets, no section


def test_budgets_must_lie_inside_the_suite_s_epochs():
    base = {"name": "s", "datasets": ["g"], "workers": [2], "seeds": [0], "epochs": 10,
            "methods": [{"label": "exact", "method": "exact"}]}
    assert suite_from_dict({**base, "budgets": [10, 5, 5]}).budgets == (5, 10)
    for bad in ([0], [11], ["5"], [True]):
        with pytest.raises(ValueError, match=r"budgets must be epoch counts in \[1, epochs\]"):
            suite_from_dict({**base, "budgets": bad})
