"""Input-feature normalisation by default: ``--normalize-features`` unset row-normalises
non-negative (bag-of-words) features for SAGE and GAT, never for GCN or for signed features, and
summary.json says what was done (``features_normalized``)."""
from __future__ import annotations

import json

import pytest

from digest.models import GAT, GCN, SAGE
from helpers import cli, needs_shared, run_workers


def test_the_default_is_the_models_on_non_negative_features_and_a_given_flag_wins():
    for model, default in ((SAGE, True), (GAT, True), (GCN, False)):
        assert model.normalizes(None, nonnegative=True) is default
        assert model.normalizes(None, nonnegative=False) is False  # signed features: never
        assert model.normalizes(True, nonnegative=False) is True
        assert model.normalizes(False, nonnegative=True) is False


def _first_steps(root, model, normalize):
    from digest.config import TrainConfig
    from digest.data.cache import prepare_partition
    part_dir = prepare_partition("Photo", 2, "metis", 0, root)
    flags = {} if normalize is None else {"normalize_features": normalize}
    cfg = TrainConfig.of(dataset="Photo", data_root=str(root), model=model, layers=3, hidden=256,
                         dropout=0.5, lr=0.01, epochs=2, **flags)
    return run_workers(_with_flag, cfg, part_dir, 2)


def _with_flag(cfg, rt, part):
    from digest.training.trainer import Trainer
    trainer = Trainer(cfg, rt, part)
    return [trainer.step(e) for e in range(cfg.optim.epochs)], trainer.features_normalized


@pytest.mark.slow
@needs_shared("Photo")
def test_sage_at_the_defaults_does_not_blow_up_on_raw_photo(tmp_path):
    """The first step on Photo's raw rows (L1 norms near 259) sends SAGE's train loss from 2.1 to
    about 34 (test_accuracy.py); at the defaults the rows are normalised on both workers."""
    ranks = _first_steps(tmp_path, "sage", None)
    assert [r[1] for r in ranks] == [True, True]
    losses = [sum(r[0][t] for r in ranks) for t in range(2)]
    assert losses[1] < 1.1 * losses[0], losses
    raw = _first_steps(tmp_path, "sage", False)
    assert [r[1] for r in raw] == [False, False]
    assert sum(r[0][1] for r in raw) > 5 * sum(r[0][0] for r in raw)
    assert [r[1] for r in _first_steps(tmp_path, "gcn", None)] == [False, False]


@pytest.mark.slow
@needs_shared("Cora")
@pytest.mark.parametrize("model,dataset,expected", [("sage", "Cora", True), ("gcn", "Cora", False),
                                                     ("sage", "synthetic:nodes=300", False)])
def test_summary_says_whether_features_were_normalized(tmp_path, model, dataset, expected):
    out = tmp_path / "run"
    done = cli(["train", "--dataset", dataset, "--model", model, "--hidden", 16, "--epochs", 1,
                "--out", out, "--no-progress"], tmp_path / "data", tmp_path)
    assert done.rc == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["features_normalized"] is expected
    assert summary["config"]["normalize_features"] is None  # unset: the default decided
