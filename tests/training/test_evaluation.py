"""digest/training/evaluation.py: ogbn-* datasets are evaluated by ogb's Evaluator (docs/methods.md
section 1), on the predictions of every worker; other datasets by hit counts over the workers."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from digest.data.cache import prepare_partition
from digest.config import TrainConfig
from digest.training.evaluation import ogb_name
from helpers import run_workers


def write_tiny_arxiv(root, n=80, edges=240, seed=0):
    """A hand-made ogbn-arxiv in ogb's folder layout (what digest/data.py's OGB loader reads):
    RELEASE_v1.txt, raw/*.csv.gz, split/time/{train,valid,test}.csv.gz."""
    d, rng = root / "ogbn_arxiv", np.random.default_rng(seed)
    for sub in ("raw", "split/time"):
        (d / sub).mkdir(parents=True)
    (d / "RELEASE_v1.txt").write_text("v1\n")
    y = rng.integers(0, 4, (n, 1))
    feat = rng.normal(size=(n, 8)) + np.eye(4)[y[:, 0]] @ rng.normal(size=(4, 8))  # learnable
    perm = rng.permutation(n)
    files = {"raw/edge.csv.gz": rng.integers(0, n, (edges, 2)), "raw/num-node-list.csv.gz": [n],
             "raw/num-edge-list.csv.gz": [edges], "raw/node-feat.csv.gz": feat,
             "raw/node-label.csv.gz": y, "raw/node_year.csv.gz": rng.integers(2000, 2020, (n, 1)),
             "split/time/train.csv.gz": np.sort(perm[: n // 2]),
             "split/time/valid.csv.gz": np.sort(perm[n // 2: 3 * n // 4]),
             "split/time/test.csv.gz": np.sort(perm[3 * n // 4:])}
    for name, arr in files.items():
        pd.DataFrame(arr).to_csv(d / name, header=False, index=False, compression="gzip")
    return n


def test_ogb_names():
    assert ogb_name("ogbn-arxiv") == "ogbn-arxiv" and ogb_name("OGBN_products") == "ogbn-products"
    for other in ("Cora", "synthetic", "synthetic:nodes=100", "a-hand-made-graph"):
        assert ogb_name(other) is None


def train_and_evaluate(cfg, rt, part):
    """A few steps, then Trainer.evaluate with ogb's Evaluator.eval wrapped to record its
    inputs; also this worker's hit counts, to check the Evaluator's numbers against."""
    from ogb.nodeproppred import Evaluator

    from digest.training.trainer import Trainer
    calls = []
    real = Evaluator.eval

    def spy(self, input_dict):
        calls.append((self.name, input_dict["y_true"].shape, input_dict["y_pred"].shape))
        return real(self, input_dict)

    Evaluator.eval = spy
    try:
        trainer = Trainer(cfg, rt, part)
        for e in range(cfg.optim.epochs):
            trainer.step(e)
        acc = trainer.evaluate()
        trainer.model.eval()
        import torch
        with torch.no_grad():
            pred = trainer.model(trainer.x, trainer.eval_view, trainer.eval_halo.halo).argmax(-1)
        hits = [int((pred[m] == trainer.y[m]).sum()) for m in trainer.masks]
        return acc, calls, hits
    finally:
        Evaluator.eval = real


@pytest.mark.parametrize("workers", [1, 2])
def test_ogbn_evaluation_goes_through_the_ogb_evaluator(tmp_path, workers):
    n = write_tiny_arxiv(tmp_path)
    part_dir = prepare_partition("ogbn-arxiv", workers, "metis", 0, tmp_path)
    cfg = TrainConfig.of(dataset="ogbn-arxiv", data_root=str(tmp_path), hidden=16, epochs=5,
                      dropout=0.0, progress=False)
    out = run_workers(train_and_evaluate, cfg, part_dir, workers)
    sizes = [n // 2, n // 4, n - 3 * n // 4]  # train, valid, test of the fixture
    hits = [sum(r[2][i] for r in out) for i in range(3)]
    for acc, calls, _ in out:  # every rank: one Evaluator call per split, on the whole split
        assert [c[0] for c in calls] == ["ogbn-arxiv"] * 3
        assert [c[1] for c in calls] == [(s, 1) for s in sizes] == [c[2] for c in calls]
        # the Evaluator's accuracy is the hit count over all workers / the split size
        assert [acc["train_acc"], acc["val_acc"], acc["test_acc"]] == pytest.approx(
            [h / s for h, s in zip(hits, sizes)])
    assert out[0][0] == out[-1][0]  # the same numbers on every rank
