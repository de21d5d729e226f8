"""How well each method fits its training set as training goes on (fit.csv; tables.md renders
it): train accuracy and loss at the epochs a suite names (``fit_epochs``), mean and std over
seeds, beside the validation accuracy. Where a method's curve runs ahead of exact's, this says
whether it fits the training nodes faster or only generalises differently."""
from __future__ import annotations

import pandas as pd

from ..suites.load import Loaded

COLUMNS = ["dataset", "method", "workers", "epoch", "seeds", "train_acc", "train_acc_std",
           "train_loss", "train_loss_std", "val_acc"]


def table(loaded: Loaded) -> pd.DataFrame:
    """One row per (dataset, label, workers, epoch in ``loaded.fit_epochs``) whose runs all
    evaluated that epoch. Shapes: ``COLUMNS``; std NaN with one seed."""
    rows = []
    keys = dict.fromkeys((r.dataset, r.label, r.workers) for r in loaded.records)
    for dataset, label, workers in keys:
        runs = [r.metrics.set_index("epoch") for r in loaded.records
                if (r.dataset, r.label, r.workers) == (dataset, label, workers)]
        for epoch in loaded.fit_epochs:
            at = [m.loc[epoch] for m in runs
                  if epoch in m.index and pd.notna(m.loc[epoch, "train_acc"])]
            if len(at) != len(runs):
                continue
            frame = pd.DataFrame(at)
            rows.append({"dataset": dataset, "method": label, "workers": workers, "epoch": epoch,
                         "seeds": len(at), "train_acc": frame["train_acc"].mean(),
                         "train_acc_std": frame["train_acc"].std(),
                         "train_loss": frame["train_loss"].mean(),
                         "train_loss_std": frame["train_loss"].std(),
                         "val_acc": frame["val_acc"].mean()})
    return pd.DataFrame(rows, columns=COLUMNS)
