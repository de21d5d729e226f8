"""The training-fit table (experiments/analysis/fit.py, experiments/render/fit.py) on hand-made
records: train accuracy and loss at the suite's epochs, mean and std over seeds; an epoch some
seed did not evaluate is left out."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from experiments.analysis.fit import table
from experiments.render.fit import section
from experiments.suites.load import Loaded, RunRecord
from experiments.suites.suite import suite_from_dict


def _record(label: str, seed: int, accs: list, losses: list) -> RunRecord:
    metrics = pd.DataFrame({"epoch": range(len(accs)), "train_acc": accs, "train_loss": losses,
                            "val_acc": [a - 0.1 if a == a else a for a in accs]})
    return RunRecord("g", label, label, 2, seed, Path("."), {}, metrics)


def test_fit_is_the_mean_and_std_over_seeds_at_each_epoch():
    recs = [_record("exact", 0, [0.5, 0.6, 0.7], [2.0, 1.5, 1.0]),
            _record("exact", 1, [0.7, 0.8, 0.9], [1.0, 0.5, 0.0]),
            _record("digest", 0, [0.6, float("nan"), 0.8], [1.0, 0.9, 0.8])]
    loaded = Loaded(recs, ["g"], ["exact", "digest"], fit_epochs=(0, 1, 2))
    t = table(loaded)
    assert list(zip(t["method"], t["epoch"])) == [("exact", 0), ("exact", 1), ("exact", 2),
                                                  ("digest", 0), ("digest", 2)]  # 1: not evaluated
    exact2 = t[(t["method"] == "exact") & (t["epoch"] == 2)].iloc[0]
    assert abs(exact2["train_acc"] - 0.8) < 1e-12 and abs(exact2["train_loss"] - 0.5) < 1e-12
    assert abs(exact2["train_acc_std"] - 0.1414213562) < 1e-9 and exact2["seeds"] == 2
    text = section(t, 6)
    assert text.startswith("\n## 6. Training fit: train accuracy (%) and train loss at epochs 0, 1, 2")
    assert "| exact | 2 | 2 | 60.00 ± 14.14 | 70.00 ± 14.14 | 80.00 ± 14.14 | 1.500 ± 0.707 |" in text
    assert "| digest | 2 | 1 | 60.00 |  | 80.00 | 1.000 |  | 0.800 |" in text
    assert section(table(Loaded(recs, ["g"], ["exact"])), 6) == ""  # no fit_epochs, no section


def test_fit_epochs_must_lie_inside_the_budget():
    base = {"name": "s", "datasets": ["g"], "workers": [2], "seeds": [0], "epochs": 10,
            "methods": [{"label": "exact", "method": "exact"}]}
    assert suite_from_dict({**base, "fit_epochs": [0, 9]}).fit_epochs == (0, 9)
    for bad in ([10], [-1], ["5"]):
        with pytest.raises(ValueError, match=r"fit_epochs must be epoch numbers in \[0, epochs\)"):
            suite_from_dict({**base, "fit_epochs": bad})
