"""Curves over training: a method's validation accuracy, time and bytes per evaluated epoch, the
mean over its seeds (the convergence plots draw them); the stale halo rows' error at each store
sync."""
from __future__ import annotations

import pandas as pd

from digest.training import record

from ..suites.load import Loaded

STALE = record.ERRORS[0]  # "stale_err": a layer's stale halo rows against fresh ones


def curves(loaded: Loaded, dataset: str, workers: int, labels=None) -> dict[str, pd.DataFrame]:
    """{label: mean over seeds per evaluated epoch of val_acc, wall_time, cum_bytes}."""
    out = {}
    for label in loaded.labels if labels is None else labels:
        recs = [r.metrics for r in loaded.records
                if r.dataset == dataset and r.label == label and r.workers == workers]
        if recs:
            m = pd.concat(recs)
            m = m[m["val_acc"].notna()]
            cols = ["val_acc", "wall_time", "cum_bytes"]
            out[label] = m.groupby("epoch")[cols].mean().reset_index()
    return out



def stale_errors(loaded: Loaded, dataset: str) -> tuple[int, list, dict] | None:
    """The relative error of the stale halo rows each layer used, at each store sync: (the largest
    worker count among the runs with ``stale_err_l{l}`` columns, those columns by layer, {label:
    {column: mean over seeds (and workers) per epoch}}) at that worker count; None without."""
    recs = [r for r in loaded.records if r.dataset == dataset
            and any(record.layer_of(c, STALE) is not None for c in r.metrics.columns)]
    if not recs:
        return None
    workers = max(r.workers for r in recs)
    recs = [r for r in recs if r.workers == workers]
    cols = sorted({c for r in recs for c in r.metrics.columns
                   if record.layer_of(c, STALE) is not None}, key=lambda c: record.layer_of(c, STALE))
    by_label = {}
    for label in (x for x in loaded.labels if any(r.label == x for r in recs)):
        m = pd.concat([r.metrics for r in recs if r.label == label])
        by_label[label] = {c: m[["epoch", c]].dropna().groupby("epoch")[c].mean()
                           for c in cols if c in m.columns}
    return workers, cols, by_label
