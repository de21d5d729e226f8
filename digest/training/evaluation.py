"""Accuracies over every worker's inner rows (docs/methods.md section 1: exact full-graph inference;
the OGB protocol's metric for ogbn-* datasets).

``Trainer.evaluate`` runs the model and calls ``accuracies``: for an ogbn-* dataset every worker's
labels and predictions of each split are gathered (each node is an inner row of exactly one
worker, so the gathered arrays are the split's nodes, in worker order) and
``ogb.nodeproppred.Evaluator`` computes the split's metric from them, on every rank; for any other
dataset the hit counts are summed over the workers and divided by the global split sizes.
Evaluation traffic is not counted as training bytes.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from ..data import DatasetError, parse_spec
from ..runtime import comm

SPLITS = ("train", "val", "test")


def ogb_name(dataset: str) -> str | None:
    """The OGB name (e.g. 'ogbn-arxiv') of a dataset spec the registry knows as an OGB dataset,
    else None (also for hand-made graphs the registry does not know)."""
    try:
        info, _ = parse_spec(dataset)
    except DatasetError:
        return None
    return info.name if info.kind == "ogb" else None


@lru_cache(maxsize=None)
def _evaluator(name: str):
    from ogb.nodeproppred import Evaluator
    return Evaluator(name)


def accuracies(dataset: str, pred: Tensor, y: Tensor, masks, totals) -> dict:
    """``{train,val,test}_acc`` of the predictions ``pred [n_inner]`` (class ids) against ``y``
    over the masks, all workers together (collective: every rank calls it). ``totals`` = the
    global split sizes (the denominators of the hit counts)."""
    name = ogb_name(dataset)
    if name is not None:
        return ogb_accuracies(name, pred, y, masks)
    hits = [float((pred[m] == y[m]).sum()) for m in masks]
    hits = comm.all_reduce_(torch.tensor(hits, dtype=torch.float64), category=None)
    return {f"{s}_acc": float(h) / max(1, t) for s, h, t in zip(SPLITS, hits, totals)}


def ogb_accuracies(name: str, pred: Tensor, y: Tensor, masks) -> dict:
    """The OGB Evaluator's metric of each split, on the labels and predictions of every worker
    (gathered: a few bytes per node of the split, once per evaluation)."""
    mine = [(y[m].cpu().numpy(), pred[m].cpu().numpy()) for m in masks]
    everyone = comm.all_gather_object(mine)
    evaluator = _evaluator(name)
    out = {}
    for i, split in enumerate(SPLITS):
        y_true = np.concatenate([w[i][0] for w in everyone]).reshape(-1, 1)
        y_pred = np.concatenate([w[i][1] for w in everyone]).reshape(-1, 1)
        if len(y_true) == 0:  # an empty split (hit counts would give 0 / 1)
            out[f"{split}_acc"] = 0.0
            continue
        result = evaluator.eval({"y_true": y_true, "y_pred": y_pred})
        out[f"{split}_acc"] = float(result[evaluator.eval_metric])
    return out
