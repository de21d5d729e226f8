"""DIGEST with vanishing staleness (baselines/vanishing.py, docs/methods.md section 8.5): the
decreasing schedule syncs at the steps its formula gives, drift with TAU = 0 syncs every step, fixed
is DIGEST, and every schedule keeps DIGEST's exact step 0."""
from __future__ import annotations

import pytest

from baselines.vanishing import interval_at
from digest.runtime import comm
from digest.data.cache import prepare_partition
from digest.config import TrainConfig
from digest.data.synthetic import make_synthetic
from digest.training.trainer import Trainer
from distributed import run_workers

EPOCHS = 12


def test_interval_falls_linearly_from_I_to_1():
    assert [interval_at(t, 10, 12) for t in range(12)] == [10, 10, 9, 8, 7, 6, 6, 5, 4, 3, 2, 1]
    assert interval_at(0, 1, 5) == 1 and interval_at(3, 4, 1) == 1


def syncs_and_losses(cfg, rt, part):
    trainer = Trainer(cfg, rt, part)
    out = []
    for t in range(cfg.optim.epochs):
        comm.traffic.reset()
        loss = trainer.step(t)
        out.append((loss, comm.traffic.bytes["store"], getattr(trainer.policy, "syncs", 0)))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    graph = make_synthetic(nodes=300, classes=4, avg_degree=8, features=12, seed=5)
    part_dir = prepare_partition("van", 2, "metis", 0, tmp_path_factory.mktemp("d"), graph=graph)
    base = dict(dataset="van", hidden=8, layers=3, dropout=0.0, epochs=EPOCHS, sync_interval=4)
    cases = {"exact": dict(method="exact", epochs=EPOCHS, dataset="van", hidden=8, dropout=0.0),
             "digest": dict(base, method="digest"),
             "fixed": dict(base, method="digest-vanishing", sync_schedule="fixed"),
             "decreasing": dict(base, method="digest-vanishing", sync_schedule="decreasing"),
             "drift0": dict(base, method="digest-vanishing", sync_schedule="drift",
                            drift_threshold=0.0)}
    return {name: run_workers(syncs_and_losses, TrainConfig.of(**flags), part_dir, 2)
            for name, flags in cases.items()}


def sync_steps(ranks):
    return [t for t, (_, _, n) in enumerate(ranks[0]) if n > (ranks[0][t - 1][2] if t else 0)]


def test_decreasing_syncs_where_its_formula_says(runs):
    expected, last = [], -1
    for t in range(EPOCHS):
        if t - last >= interval_at(t, 4, EPOCHS):
            expected.append(t)
            last = t
    assert sync_steps(runs["decreasing"]) == expected == [3, 6, 8, 10, 11]


def test_drift_with_tau_zero_syncs_every_step(runs):
    assert sync_steps(runs["drift0"]) == list(range(EPOCHS))
    assert all(store > 0 for _, store, _ in runs["drift0"][0])


def test_fixed_is_digest_and_step_zero_is_exact(runs):
    loss = {name: [sum(r[t][0] for r in ranks) for t in range(EPOCHS)] for name, ranks in runs.items()}
    assert loss["fixed"] == loss["digest"]
    assert sync_steps(runs["fixed"]) == sync_steps(runs["digest"]) == [3, 7, 11]
    for name in ("digest", "decreasing", "drift0"):
        assert loss[name][0] == pytest.approx(loss["exact"][0], abs=1e-6), name
    # drift with TAU = 0 refreshes every step: the halo is one step old, never older
    assert loss["drift0"] != loss["digest"]
