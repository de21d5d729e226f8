"""Accuracy of exact full-graph predictions, over every worker (METHODS.md section 1)."""
from __future__ import annotations

import torch
from torch import Tensor

from . import comm
from .local_graph import LocalPart

SPLITS = ("train", "val", "test")


class Evaluator:
    """Train / val / test accuracy from each worker's predictions on its inner rows.

    Args:
        part: this worker's part (global split sizes).
        masks: ``[n_inner]`` boolean train, val and test masks.
        y: ``[n_inner]`` labels.
    """

    def __init__(self, part: LocalPart, masks: list[Tensor], y: Tensor):
        self.masks, self.y = masks, y
        self.totals = [part.num_train_global, part.num_val_global, part.num_test_global]

    def __call__(self, pred: Tensor) -> dict:
        """``pred``: ``[n_inner]`` predicted classes. Collective: every worker calls it."""
        hits = [float((pred[m] == self.y[m]).sum()) for m in self.masks]
        hits = comm.all_reduce_(torch.tensor(hits, dtype=torch.float64), category=None)
        return {f"{s}_acc": float(h) / max(1, t) for s, h, t in zip(SPLITS, hits, self.totals)}
