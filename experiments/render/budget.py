"""The accuracy-by-budget section of tables.md (budget.csv: experiments/analysis/budget.py): per
dataset, one row a method, test accuracy and its difference from exact at each budget."""
from __future__ import annotations

import pandas as pd

from .markdown import md_table, pm


def _cell(row) -> str:
    acc = pm(row.test_acc, row.test_acc_std, 100)
    if pd.isna(row.diff_vs_exact):
        return acc
    return (f"{acc} ({100 * row.diff_vs_exact:+.2f} [{100 * row.diff_min:+.2f}, "
            f"{100 * row.diff_max:+.2f}])")


def section(budget: pd.DataFrame, number: int) -> str:
    """``## number. Accuracy by budget ...`` with a table per dataset; "" for an empty table."""
    if budget.empty:
        return ""
    budgets = sorted(set(budget["budget"]))
    out = [f"\n## {number}. Accuracy by budget: test accuracy (%) at best validation within the "
           f"first {', '.join(map(str, budgets))} epochs, mean ± std over seeds (difference from "
           "exact, mean [min, max] over the seeds, paired by seed)\n\n",
           "Each run's first B epochs are the run a budget of B would have made (constant "
           "learning rate). Under each method, the latest best-validation epoch over the seeds "
           "(counted from 1); last, whether exact converged within the budget (its "
           "best-validation epoch at most 0.8 x B at every seed).\n"]
    for dataset, part in budget.groupby("dataset", sort=False):
        rows = []
        for (label, workers), g in part.groupby(["method", "workers"], sort=False):
            at = {b: r for b, r in zip(g["budget"], g.itertuples())}
            rows.append([label, workers, int(g["seeds"].max()),
                         *(_cell(at[b]) if b in at else "" for b in budgets)])
            rows.append([f"{label}: latest best epoch", "", "",
                         *(str(at[b].best_epoch_max) if b in at else "" for b in budgets)])
        conv = {b: r.converged for b, r in zip(part["budget"], part.itertuples())}
        rows.append(["exact converged", "", "", *("yes" if conv.get(b) else "no" for b in budgets)])
        head = ["method", "M", "seeds", *(f"@{b} epochs" for b in budgets)]
        out.append(f"\n### {dataset}\n\n{md_table(head, rows)}")
    return "".join(out)
