"""The training-fit section of tables.md (fit.csv: experiments/analysis/fit.py): per dataset, one
row a method, train accuracy and loss at each of the suite's ``fit_epochs``."""
from __future__ import annotations

import pandas as pd

from .markdown import md_table, pm


def section(fit: pd.DataFrame, number: int) -> str:
    """``## number. Training fit ...`` with a table per dataset; "" for an empty table."""
    if fit.empty:
        return ""
    epochs = sorted(set(fit["epoch"]))
    out = [f"\n## {number}. Training fit: train accuracy (%) and train loss at epochs "
           f"{', '.join(map(str, epochs))}, mean ± std over seeds\n\n",
           "Accuracy on the training nodes at that epoch's evaluation (dropout off), and the "
           "training loss of that epoch's step; a method whose validation curve runs ahead of "
           "exact's either fits the training nodes faster (its train accuracy is ahead too) or "
           "generalises differently at the same fit.\n"]
    for dataset, part in fit.groupby("dataset", sort=False):
        rows = []
        for (label, workers), g in part.groupby(["method", "workers"], sort=False):
            at = {e: r for e, r in zip(g["epoch"], g.itertuples())}
            rows.append([label, workers, int(g["seeds"].max()),
                         *(pm(at[e].train_acc, at[e].train_acc_std, 100, 2) if e in at else ""
                           for e in epochs),
                         *(pm(at[e].train_loss, at[e].train_loss_std, 1, 3) if e in at else ""
                           for e in epochs)])
        head = ["method", "M", "seeds", *(f"train acc @{e}" for e in epochs),
                *(f"loss @{e}" for e in epochs)]
        out.append(f"\n### {dataset}\n\n{md_table(head, rows)}")
    return "".join(out)
