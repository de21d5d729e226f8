"""The verdict's SAT rows (experiments/studies/verdict/analysis.py ``prediction_share``,
experiments/studies/verdict/render.py ``_label``): how often SAT's gate let the prediction through, read
from a run's per-layer ``sat_used_l{l}`` columns, and the row that says so."""
from __future__ import annotations

import pandas as pd
import pytest

from experiments.analysis.convergence import prediction_share
from experiments.studies.verdict.render import _label


def test_the_share_is_over_every_step_and_layer():
    m = pd.DataFrame({"epoch": range(4), "sat_used_l1": [0, 1, 1, 1], "sat_used_l2": [0, 0, 1, 1]})
    assert prediction_share(m) == 5 / 8
    assert prediction_share(m.drop(columns=["sat_used_l1", "sat_used_l2"])) is None  # no SAT


@pytest.mark.parametrize("share, says", [
    (None, "digest-I10"),
    (0.0, "sat-I10 (prediction read at 0% of steps: DIGEST's training plus the predictor's cost)"),
    (0.95, "sat-I10 (prediction read at 95% of steps)")])
def test_a_sat_row_says_how_often_it_read_the_prediction(share, says):
    method = "digest-I10" if share is None else "sat-I10"
    row = pd.DataFrame([{"method": method, "predicted": share}]).itertuples().__next__()
    assert _label(row) == says
