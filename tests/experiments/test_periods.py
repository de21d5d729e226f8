"""experiments/analysis/periods.py: a run's period from its flags, the timed window of whole periods after
the warm-up, and the per-epoch time as the mean over it (never a median). Hand-made numbers."""
from __future__ import annotations

import pandas as pd
import pytest

from experiments.analysis import periods


@pytest.mark.parametrize("config, want", [
    ({"method": "exact"}, 1),
    ({"method": "digest", "sync_interval": 10}, 10),
    ({"method": "digest", "sync_interval": 10, "local_steps": 3}, 30),
    ({"method": "digest", "sync_interval": 10, "local_steps": 5}, 10),
    ({"method": "sylvie", "sync_every": 10, "local_steps": 1}, 10),
    ({"method": "adaqp", "quant_assign": "adaptive", "quant_adapt_every": 20}, 20),
    ({"method": "adaqp", "quant_assign": "uniform", "quant_adapt_every": 20}, 1),
    ({"method": "digest-vanishing", "sync_interval": 10, "sync_schedule": "decreasing"}, None),
    ({"method": "digest-vanishing", "sync_interval": 10, "sync_schedule": "fixed"}, 10),
    ({"method": "sat", "sync_interval": 1}, 1),
])
def test_period_from_the_flags(config, want):
    assert periods.period(config) == want


def test_the_window_holds_whole_periods_after_the_warm_up():
    assert periods.window(23, 3, 10) == periods.Window(3, 23)          # 2 periods
    assert periods.window(18, 3, 10) == periods.Window(3, 13)          # 1 period of the 15
    assert periods.window(18, 3, 1) == periods.Window(3, 18)
    assert periods.window(18, 3, 30) == periods.Window(0, 18, whole=True)
    assert periods.window(18, 3, None) == periods.Window(0, 18, whole=True)
    assert periods.joint(10, 3) == 30 and periods.joint(10, None) is None and periods.joint(1, 10) == 10
    assert periods.describe(periods.Window(3, 23), 10) == "20 (2 x 10)"
    assert periods.describe(periods.Window(3, 18), 1) == "15"
    assert periods.describe(periods.Window(0, 18, True), 30) == "whole run (18, period 30)"
    assert periods.describe(periods.Window(0, 18, True), None) == "whole run (18, no fixed period)"


def test_the_epoch_time_is_the_mean_over_whole_periods():
    """A refresh (1.0 s) every 4th epoch, 0.2 s otherwise, after 2 warm-up epochs of 9 s; 11
    epochs: the window is epochs 2..9 (two periods), mean 0.4 s; the median would say 0.2 s, and
    a mean over all 9 timed epochs would count a third refresh-free epoch (0.378 s)."""
    t = [9.0, 9.0] + [0.2, 0.2, 0.2, 1.0] * 2 + [0.2]
    m = pd.DataFrame({"epoch_time": t})
    assert periods.epoch_time(m, {"method": "digest", "sync_interval": 4}, 2) == pytest.approx(0.4)
    assert list(periods.timed_rows(m, {"method": "digest", "sync_interval": 4}, 2)["epoch_time"]) == t[2:10]
    assert periods.epoch_time(m, {}, 2) == pytest.approx(sum(t[2:]) / 9)
