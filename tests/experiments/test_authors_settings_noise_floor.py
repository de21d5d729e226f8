"""The dropout noise floor of the drift criteria :
SANCUS's skip test and digest-vanishing's drift schedule compare training-mode rows, which dropout
masks alone set apart. Every run trains at lr 1e-7, so the parameters barely move and the drift
between two steps is the masks' doing: at dropout 0.5 a threshold under the measured floor re-sends
every block (syncs every step), at dropout 0 the same threshold skips until the staleness bound.

All configurations run in ONE launch of 2 real gloo workers (start-up dominates the cost).
"""
from __future__ import annotations

import pytest

from digest.config import TrainConfig
from digest.data.cache import prepare_partition
from digest.data.synthetic import make_synthetic
from helpers import run_workers, train_runs

T = 8
EPS = 1e-3  # far under the floor at dropout 0.5 (measured ~0.3-0.6 here), far over lr 1e-7's drift
BASE = TrainConfig.of(dataset="nf", hidden=16, layers=3, dropout=0.5, epochs=T, lr=1e-7,
                      progress=False)
RUNS = {
    "sancus_p5": dict(method="sancus", skip_threshold=EPS, max_staleness=3),
    "sancus_p0": dict(method="sancus", skip_threshold=EPS, max_staleness=3, dropout=0.0),
    "drift_p5": dict(method="digest-vanishing", sync_schedule="drift", drift_threshold=EPS,
                     sync_interval=3),
    "drift_p0": dict(method="digest-vanishing", sync_schedule="drift", drift_threshold=EPS,
                     sync_interval=3, dropout=0.0),
    # the probe leaves the run alone: EPS = 0 sends every block, so SANCUS is the exact method,
    # dropout masks included, only when the probes drew no mask from the training stream
    "exact_default_lr": dict(method="exact", lr=0.01),
    "sancus_eps0_default_lr": dict(method="sancus", skip_threshold=0.0, lr=0.01),
}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    graph = make_synthetic(nodes=300, classes=4, avg_degree=8, features=12, seed=1)
    part_dir = prepare_partition("nf", 2, "metis", 0, tmp_path_factory.mktemp("data"), graph=graph)
    return run_workers(train_runs, BASE, part_dir, 2, runs=RUNS)


def column(ranks, run, key):
    """Per step, the values of ``key`` on every worker (None where a step has no such column)."""
    return [[r[run][t].get(key) for r in ranks] for t in range(T)]


def test_sancus_sends_every_block_under_dropout_and_skips_without(ranks):
    assert column(ranks, "sancus_p5", "sent_fraction") == [[1.0, 1.0]] * T
    # dropout 0: nothing moved by EPS, so a block is re-sent only at the staleness bound S = 3
    assert [c[0] for c in column(ranks, "sancus_p0", "sent_fraction")] == [1, 0, 0, 0, 1, 0, 0, 0]
    assert column(ranks, "sancus_p0", "sent_fraction")[1:4] == [[0.0, 0.0]] * 3


def test_sancus_reports_its_noise_floor_at_the_first_and_last_step(ranks):
    for run in ("sancus_p5", "sancus_p0"):
        for t in range(1, T - 1):
            assert not any(k.startswith("noise_floor") for r in ranks for k in r[run][t]), (run, t)
    for t in (0, T - 1):
        for key in ("noise_floor_l1", "noise_floor_l2", "noise_floor_min"):
            assert column(ranks, "sancus_p0", key)[t] == [0.0, 0.0]  # identical passes
            floors = column(ranks, "sancus_p5", key)[t]
            assert all(0.05 < f < 2 for f in floors), (key, t, floors)  # far over EPS
        mine = ranks[0]["sancus_p5"][t]
        least = min(mine["noise_floor_l1"], mine["noise_floor_l2"])
        assert mine["noise_floor_min"] <= least + 1e-12  # the pooled floor averages its blocks


def test_drift_schedule_syncs_every_step_under_dropout_and_at_the_bound_without(ranks):
    # dropout 0.5: the drift of every step is over EPS, so the store syncs after every step
    assert [c[0] for c in column(ranks, "drift_p5", "store_syncs")] == list(range(1, T + 1))
    # dropout 0: no drift at all; syncs every I = 3 steps (the fill counts as step -1)
    assert [c[0] for c in column(ranks, "drift_p0", "store_syncs")] == [0, 0, 1, 1, 1, 2, 2, 2]
    for t in (0, T - 1):
        p5 = column(ranks, "drift_p5", "noise_floor")[t]
        assert p5[0] == p5[1] and 0.05 < p5[0] < 2  # the largest over workers, on both
        for key in ("noise_floor", "noise_floor_l1", "noise_floor_l2"):
            assert column(ranks, "drift_p0", key)[t] == [0.0, 0.0]
    assert "noise_floor" not in ranks[0]["drift_p5"][1]


def test_the_probe_changes_nothing_in_the_run(ranks):
    """Probes before steps 0 and T - 1 draw their masks from a forked generator and count no
    bytes: SANCUS at EPS = 0 (every block sent) then equals exact, loss for loss, dropout on."""
    for r in ranks:
        exact, sancus = r["exact_default_lr"], r["sancus_eps0_default_lr"]
        assert [s["loss"] for s in sancus] == pytest.approx([e["loss"] for e in exact], rel=1e-6)
        assert [s["bytes_halo_bwd"] for s in sancus] == [e["bytes_halo_bwd"] for e in exact]
        flags = 2  # one flag byte per (layer, peer): 2 exchanged layers, 1 peer
        assert [s["bytes_halo_fwd"] for s in sancus] == [e["bytes_halo_fwd"] + flags for e in exact]
        assert [s["messages"] for s in sancus] == [e["messages"] + 2 for e in exact]
        assert sancus[0]["noise_floor_l1"] > 0 and sancus[-1]["noise_floor_l1"] > 0
