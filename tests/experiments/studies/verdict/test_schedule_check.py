"""experiments/studies/verdict/schedule_check.py: a method's time to the target on its own run (the sum
of its epoch times up to the first evaluation at the target), the speedup end to end over the
seeds both reached, and the verdict's cell against it. No training."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from experiments.studies.verdict.schedule_check import check
from experiments.studies.verdict.screen import check_lines
from experiments.suites.load import Loaded, RunRecord


def run(label: str, seed: int, hit_at: int | None, epoch_s: float):
    """Validation 0.5 until epoch ``hit_at`` (1-based; None: never), then 0.8."""
    vals = [0.5] * 10 if hit_at is None else [0.5] * (hit_at - 1) + [0.8] * (11 - hit_at)
    m = pd.DataFrame({"epoch": range(len(vals)), "epoch_time": [epoch_s] * len(vals),
                      "val_acc": vals})
    return RunRecord("toy", f"{label}@50mbit", label.split("-")[0], 4, seed, Path("."), {}, m)


def test_the_cells_against_the_runs_to_the_target():
    runs = Loaded([run("exact", 0, 4, 2.0), run("exact", 1, 6, 2.0),
                   run("digest-I10", 0, 5, 1.0), run("digest-I10", 1, 5, 1.0),
                   run("varco", 0, None, 1.0), run("varco", 1, 3, 1.0)], ["toy"], [])
    speed = pd.DataFrame([{"method": "digest-I10", "bandwidth": "50mbit", "speedup": 2.1},
                          {"method": "varco", "bandwidth": "50mbit", "speedup": 3.0}])
    got = check(runs, 0.7, speed).set_index("method")
    # exact: 8 s and 12 s to the target; digest: 5 s at both seeds -> 10 / 5 = 2x; the cell 2.1x
    assert got.loc["digest-I10", "e2e_speedup"] == pytest.approx(2.0)
    assert got.loc["digest-I10", "error_pct"] == pytest.approx(5.0)
    assert got.loc["digest-I10", "epochs"] == "5;5"
    # varco missed at seed 0: only seed 1 counts (12 s / 3 s), and the row says 1 of 2 reached
    assert got.loc["varco", "e2e_speedup"] == pytest.approx(4.0)
    assert got.loc["varco", "reached"] == 1 and got.loc["varco", "epochs"] == "-;3"
    text = "\n".join(check_lines(got.reset_index(), "suite"))
    assert "1 of 2 cells within 10% of it (largest difference 25.0%)" in text
