"""DIGEST with vanishing staleness (baselines/vanishing.py, docs/methods.md section 8.5): the
decreasing schedule syncs at the steps its formula gives, drift with TAU = 0 syncs every step, fixed
is DIGEST, and every schedule keeps DIGEST's exact step 0."""
from __future__ import annotations

import pytest

from baselines.vanishing import interval_at
from digest.config import TrainConfig
from digest.data.cache import load_book
from helpers import launch_world, small_graph, total, train_runs

EPOCHS, H = 12, 8
BASE = TrainConfig.of(dataset="van", hidden=H, layers=3, dropout=0.0, epochs=EPOCHS,
                      progress=False)
RUNS = {"exact": dict(method="exact"),
        "digest": dict(method="digest", sync_interval=4),
        "fixed": dict(method="digest-vanishing", sync_interval=4, sync_schedule="fixed"),
        "decreasing": dict(method="digest-vanishing", sync_interval=4,
                           sync_schedule="decreasing"),
        "drift0": dict(method="digest-vanishing", sync_interval=4, sync_schedule="drift",
                       drift_threshold=0.0)}


def test_interval_falls_linearly_from_I_to_1():
    assert [interval_at(t, 10, 12) for t in range(12)] == [10, 10, 9, 8, 7, 6, 6, 5, 4, 3, 2, 1]
    assert interval_at(0, 1, 5) == 1 and interval_at(3, 4, 1) == 1


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    part_dir, ranks = launch_world(tmp_path_factory.mktemp("d"), "van", 2, train_runs, BASE,
                                   small_graph(seed=5), runs=RUNS)
    return sum(load_book(part_dir).stats["halo_sizes"]), ranks


def sync_steps(ranks, run):
    syncs = [r["store_syncs"] for r in ranks[0][run]]
    return [t for t, n in enumerate(syncs) if n > (syncs[t - 1] if t else 0)]


def test_decreasing_syncs_where_its_formula_says(runs):
    expected, last = [], -1
    for t in range(EPOCHS):
        if t - last >= interval_at(t, 4, EPOCHS):
            expected.append(t)
            last = t
    assert sync_steps(runs[1], "decreasing") == expected == [3, 6, 8, 10, 11]


def test_drift_with_tau_zero_syncs_every_step(runs):
    assert sync_steps(runs[1], "drift0") == list(range(EPOCHS))


def test_bytes_are_the_hand_derived_count(runs):
    """Store bytes per step, summed over the 2 workers: each sync moves every boundary row of
    both hidden layers once (the halo rows of all workers, H float32 columns per layer), and so
    does the fill before step 0; the drift schedule adds, at every step, its max all-reduce of one
    float64 (a ring all-reduce: 2 (M - 1) / M x 8 bytes per worker). Nothing else is counted as
    store traffic; the halo exchanges are the input features' fetch at step 0 only."""
    halo_rows, ranks = runs
    sync, drift = halo_rows * H * 4 * 2, 2 * (2 * (2 - 1) * 8 // 2)
    for name in ("digest", "fixed", "decreasing", "drift0"):
        synced = sync_steps(ranks, name)
        expected = [sync * ((t in synced) + (t == 0)) + (drift if name == "drift0" else 0)
                    for t in range(EPOCHS)]
        assert total(ranks, name, "bytes_store") == expected, name
        assert total(ranks, name, "bytes_halo_fwd") == total(ranks, name, "input_bytes"), name
        assert set(total(ranks, name, "bytes_halo_bwd")) == {0}, name


def test_fixed_is_digest_and_step_zero_is_exact(runs):
    ranks = runs[1]
    loss = {name: total(ranks, name, "loss") for name in RUNS}
    assert loss["fixed"] == loss["digest"]
    assert sync_steps(ranks, "fixed") == sync_steps(ranks, "digest") == [3, 7, 11]
    for name in ("digest", "decreasing", "drift0"):
        assert loss[name][0] == pytest.approx(loss["exact"][0], abs=1e-6), name
    # drift with TAU = 0 refreshes every step: the halo is one step old, never older
    assert loss["drift0"] != loss["digest"]
