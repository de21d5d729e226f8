"""Accuracy as if training had stopped at each of a suite's epoch ``budgets`` (budget.csv;
tables.md renders it): the OGB protocol (test accuracy at the first best validation accuracy)
applied to each run's first B epochs. With a constant learning rate and no early stop, a run's
first B epochs are the run a budget of B would have made, so one long run per seed answers
"does a method's loss against exact last once exact has converged?" (docs/methods.md section 12:
converged = exact's best-validation epoch <= 0.8 x the budget at every seed)."""
from __future__ import annotations

import pandas as pd

from digest.training.metrics import best_validation

from ..suites.load import Loaded
from .convergence import CONVERGED  # exact's best-validation epoch at most this fraction of a budget

COLUMNS = ["dataset", "method", "workers", "budget", "seeds", "test_acc", "test_acc_std",
           "diff_vs_exact", "diff_min", "diff_max", "best_epoch_max", "converged"]


def best_within(metrics: pd.DataFrame, budget: int) -> tuple[float, int] | None:
    """(test accuracy at the first best validation accuracy, its epoch counted from 1, as the
    verdict counts it) over epochs < ``budget`` (metrics.csv counts from 0); None when no epoch
    there was evaluated."""
    m = metrics[(metrics["epoch"] < budget) & metrics["val_acc"].notna()]
    best = best_validation(m.to_dict("records"))  # the runs' own rule: the first best wins
    if best["best_epoch"] is None:
        return None
    return float(best["test_at_best_val"]), int(best["best_epoch"]) + 1


def table(loaded: Loaded, reference: str = "exact") -> pd.DataFrame:
    """One row per (dataset, label, workers, budget) whose runs all cover the budget. The
    difference from ``reference`` is paired by seed (mean, min and max over the seeds both ran;
    NaN on the reference's own row); ``converged`` says, for every row, whether the reference's
    best epoch was at most 0.8 x the budget at every seed. Shapes: ``COLUMNS``; std NaN with one seed."""
    at = {}  # (dataset, label, workers, budget) -> {seed: (test, epoch)}
    for r in loaded.records:
        for b in loaded.budgets:
            got = best_within(r.metrics, b) if r.metrics["epoch"].max() >= b - 1 else None
            if got is not None:
                at.setdefault((r.dataset, r.label, r.workers, b), {})[r.seed] = got
    rows = []
    for (dataset, label, workers, b), by_seed in at.items():
        ref = at.get((dataset, reference, workers, b), {})
        diffs = pd.Series([t - ref[s][0] for s, (t, _) in by_seed.items()
                           if s in ref and label != reference], dtype=float)
        tests = pd.Series([t for t, _ in by_seed.values()], dtype=float)
        ref_epochs = [e for _, e in ref.values()]
        rows.append({"dataset": dataset, "method": label, "workers": workers, "budget": b,
                     "seeds": len(by_seed), "test_acc": tests.mean(), "test_acc_std": tests.std(),
                     "diff_vs_exact": diffs.mean() if len(diffs) else float("nan"),
                     "diff_min": diffs.min() if len(diffs) else float("nan"),
                     "diff_max": diffs.max() if len(diffs) else float("nan"),
                     "best_epoch_max": max(e for _, e in by_seed.values()),
                     "converged": bool(ref_epochs) and max(ref_epochs) <= CONVERGED * b})
    return pd.DataFrame(rows, columns=COLUMNS)
