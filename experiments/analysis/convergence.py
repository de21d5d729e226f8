"""Convergence runs read for the verdict (docs/methods.md section 12): per label and seed,
epochs to the target (q x exact's mean best validation accuracy, the first evaluation at or
above it), test accuracy at best validation, whether exact converged within its budget, bytes
per epoch and, for SAT, how often its gate let the prediction through. Pure analysis, no files."""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import pandas as pd

from digest.advise.protocol import FALLBACK, TARGET

from ..suites.load import Loaded

Q = TARGET  # target: this fraction of exact's mean best validation accuracy (FALLBACK where
# exact itself misses it at some seed)
CONVERGED = 0.8     # exact's best-validation epoch at most this fraction of the budget

@dataclass
class Convergence:
    """One label's convergence runs on a graph: per seed, epochs to target (None: missed), test
    accuracy at best validation, best validation accuracy, best-validation epoch (1-based);
    the budget; bytes per epoch (MiB, mean over seeds)."""
    label: str
    method: str
    seeds: list
    epochs: dict
    test: dict
    best_epoch: dict
    budget: int
    mib: float
    best_val: dict = field(default_factory=dict)
    q: float = Q  # the target's fraction of exact's mean best validation accuracy
    predicted: float | None = None  # SAT: share of (step, layer) reading the prediction


PREDICTION_USED = "sat_used_l"  # SAT's per-layer column: 1 where a step read the prediction


def prediction_share(metrics: pd.DataFrame) -> float | None:
    """SAT: the share of (step, layer) in which the gate let the prediction through (the rest read
    DIGEST's store rows); None for a method without a predictor."""
    used = [c for c in metrics.columns if c.startswith(PREDICTION_USED)]
    return float(metrics[used].to_numpy().mean()) if used else None


def epochs_to(metrics: pd.DataFrame, target: float) -> int | None:
    """Epochs run up to the first evaluation at or above ``target`` (1-based), None if never."""
    hit = metrics.index[metrics["val_acc"].notna() & (metrics["val_acc"] >= target)]
    return None if len(hit) == 0 else int(metrics.loc[hit[0], "epoch"]) + 1


def training_seconds(metrics: pd.DataFrame, epochs: int | None = None) -> float:
    """Seconds on the training clock (evaluation is outside it) of a run's first ``epochs``
    epochs, or of all of them."""
    return float(metrics["epoch_time"].iloc[:epochs].sum())


def target_of(loaded: Loaded, q: float = Q) -> float:
    """q x exact's mean best validation accuracy over its seeds."""
    vals = [r.summary["best_val"] for r in loaded.records if r.label == "exact"]
    if not vals:
        raise ValueError("the convergence suite has no exact runs")
    return q * float(np.mean(vals))


def convergence(loaded: Loaded, q: float | None = None) -> dict[str, Convergence]:
    """{label: Convergence} of every label of a convergence suite (round 0, one run per seed), at
    target ``q``; None: ``Q``, or the first of ``FALLBACK`` that exact reaches at every seed if it
    misses ``Q`` at one (``Q`` again if it misses them all)."""
    if q is None:
        first = convergence(loaded, Q)
        for conv in chain([first], (convergence(loaded, x) for x in FALLBACK)):
            if None not in conv["exact"].epochs.values():
                return conv
        return first
    target, out = target_of(loaded, q), {}
    for r in loaded.records:
        c = out.setdefault(r.label, Convergence(r.label, r.method, [], {}, {}, {}, len(r.metrics),
                                                0.0, q=q))
        m = r.metrics
        c.seeds.append(r.seed)
        c.epochs[r.seed] = epochs_to(m, target)
        c.test[r.seed] = float(r.summary["test_at_best_val"])
        c.best_val[r.seed] = float(r.summary["best_val"])
        c.best_epoch[r.seed] = int(r.summary.get("best_epoch", m["val_acc"].idxmax())) + 1
        c.mib += float(m["bytes_total"].mean()) / 2**20
        share = prediction_share(m)
        if share is not None:
            c.predicted = (c.predicted or 0.0) + share
    for c in out.values():  # the sums over seeds -> their means
        c.mib /= len(c.seeds)
        c.predicted = None if c.predicted is None else c.predicted / len(c.seeds)
    return out


def converged(c: Convergence) -> bool:
    """Whether exact's best-validation epoch is at most CONVERGED x the budget at every seed."""
    return all(e <= CONVERGED * c.budget for e in c.best_epoch.values())


def target_of_conv(conv: dict) -> float:
    """The target from the convergence frames (q x exact's mean best validation accuracy)."""
    return conv["exact"].q * float(np.mean(list(conv["exact"].best_val.values())))
