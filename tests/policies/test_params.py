"""Parameter policies (digest/policies/params.py): the flat buffer helpers, and model averaging under
``--local-steps K``: evaluated (and finished) only on averaged parameters, identical on every
worker at those steps."""
from __future__ import annotations

import torch

from digest.data.cache import prepare_partition
from digest.config import TrainConfig
from digest.policies.params import ModelAveraging, flatten, unflatten
from digest.training.trainer import Trainer
from helpers import run_workers


def test_flatten_unflatten_are_views_in_order():
    a, b = torch.arange(6.0).view(2, 3), torch.tensor([7.0, 8.0])
    flat = flatten([a, b])
    assert flat.tolist() == [0, 1, 2, 3, 4, 5, 7, 8]
    va, vb = unflatten(flat, [a, b])
    assert va.shape == (2, 3) and torch.equal(va, a) and torch.equal(vb, b)
    flat[0] = 100.0  # views of the buffer, not copies
    assert va[0, 0] == 100.0


def test_averaging_steps_include_the_last():
    avg = ModelAveraging.__new__(ModelAveraging)
    avg.k, avg.last = 3, 6  # 7 epochs
    assert [s for s in range(7) if avg.averaged(s)] == [2, 5, 6]


def averaged_fit(cfg, rt, part, out):
    trainer = Trainer(cfg, rt, part)
    trainer.fit(out, {})
    return trainer.rows, torch.cat([p.detach().flatten() for p in trainer.model.parameters()])


def test_local_steps_evaluate_only_averaged_models(data_root, tmp_path):
    """partition, 2 workers, K = 3, 7 epochs (the issue's reproduction): rows with accuracies are
    exactly the averaging steps 2 and 5 and the last (6), and the workers end identical."""
    cfg = TrainConfig.of(dataset="synthetic:nodes=400,seed=4", method="partition", local_steps=3,
                         epochs=7, hidden=16, eval_every=1, progress=False)
    part_dir = prepare_partition(cfg.data.dataset, 2, "metis", cfg.seed)
    (rows, p0), (_, p1) = run_workers(averaged_fit, cfg, part_dir, 2, out=str(tmp_path))
    assert [r["epoch"] for r in rows if "val_acc" in r] == [2, 5, 6]
    assert torch.equal(p0, p1)
    assert all(r["bytes_params"] > 0 for r in rows if r["epoch"] in (2, 5, 6))
    assert all(r["bytes_params"] == 0 for r in rows if r["epoch"] not in (2, 5, 6))
