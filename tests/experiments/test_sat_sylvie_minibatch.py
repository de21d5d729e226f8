"""The third wave's suites (experiments/configs/sat_sylvie_minibatch.yaml, sat_sylvie_minibatch_physics.yaml) parse, name only
real flags, and plan the runs their headers' time estimates count."""
from __future__ import annotations

from collections import Counter

import pytest

from experiments.suites.suite import expand, load_suite


@pytest.mark.parametrize("name,plan", [
    ("sat_sylvie_minibatch", {("synthetic", "sat-I10"): 1, ("CS", "sat-I10"): 1, ("CS", "sat-I10-residual"): 1,
               ("CS", "sat-I10-sync-residual"): 1, ("CS", "sat-I10-sync-mean"): 1,
               ("CS", "sat-I10-sync-resmean"): 1,
               ("synthetic", "sat-I10-residual"): 0, ("synthetic", "minibatch"): 3,
               ("CS", "minibatch"): 1, ("synthetic", "minibatch-b64"): 1, ("CS", "sylvie"): 3,
               ("synthetic", "exact"): 3, ("CS", "adaqp-2"): 3}),
    ("sat_sylvie_minibatch_physics", {("Physics", "sat-I10"): 1, ("Physics", "minibatch"): 1,
                       ("Physics", "sylvie"): 3, ("Physics", "pipegcn"): 3,
                       ("Physics", "sat-I10-sync-mean"): 1, ("Physics", "sat-I10-sync-resmean"): 1}),
])
def test_wave3_suites(name, plan):
    suite = load_suite(name)
    runs = expand(suite)
    count = Counter((r.dataset, r.label) for r in runs)
    assert {k: count[k] for k in plan} == plan
    assert len(runs) == {"sat_sylvie_minibatch": 41, "sat_sylvie_minibatch_physics": 19}[name]
    assert all(r.flags["epochs"] == 200 and r.flags["workers"] == 4 for r in runs)
