"""The committed speed tables follow the timing rule (docs/methods.md section 11), checked against
the committed run files by a computation written apart from experiments/analysis/periods.py and
timing.py: DIGEST's per-epoch speedup at I = 10 behind 50 Mbit/s is the median over rounds of
the ratio of mean epoch times over whole sync periods."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITES = ("cluster_speed", "cluster_speed_w8", "cluster_speed_physics")


def whole_periods_mean(run: Path, warmup: int = 3, interval: int = 10) -> float:
    """Mean epoch time over the epochs after the warm-up, cut to a multiple of the interval."""
    t = pd.read_csv(run / "metrics.csv")["epoch_time"].tolist()[warmup:]
    t = t[:len(t) // interval * interval] if len(t) >= interval else t
    return sum(t) / len(t)


@pytest.mark.parametrize("suite", SUITES)
def test_digest_at_50mbit_is_the_ratio_of_means_over_whole_sync_periods(suite):
    results = ROOT / "results" / suite
    if not (results / "timing.csv").exists():
        pytest.skip(f"{suite} has no committed timing.csv")
    ratios = []
    for digest in sorted(results.glob("runs/*/digest-I10@50mbit_w*")):
        exact = digest.parent / digest.name.replace("digest-I10@", "exact@")
        assert json.loads((digest / "summary.json").read_text())["config"]["sync_interval"] == 10
        ratios.append(whole_periods_mean(exact) / whole_periods_mean(digest))
    assert len(ratios) == 3  # one seed, three rounds
    timing = pd.read_csv(results / "timing.csv")
    row = timing[timing.method == "digest-I10@50mbit"].iloc[0]
    assert row.speedup == pytest.approx(statistics.median(ratios), rel=0.10)
    assert row.timed_epochs == "10 (1 x 10)"
