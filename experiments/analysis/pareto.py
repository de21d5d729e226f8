"""Pareto summary, the computation: per dataset, which method gives the best test accuracy for a
budget of cumulative bytes sent, or of training time? experiments/render/pareto.py draws and
tabulates it.

The rules are RULES below, written once: tables.md's Pareto section prints them as they stand.
What only the code needs is at the functions: the float slack of "<= budget" (``REL``,
``within_budget``), the rounding of budgets (``budgets``), ties (``TIE``, ``mark_front``), the
other worker-count choices (``groups``) and how time axes are named and kept apart (``_axes``).

    pareto.csv   one row per (dataset, workers, axis, budget, method)
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..suites.load import Loaded

N_BUDGETS = 8
TIE = 1e-9  # accuracies this close are ties (float rounding of means over seeds)
REL = 1e-9  # relative slack of "<= budget": a sum of epoch times 0.1 + 0.1 + 0.1 is within 0.3
MiB = 2**20
COLUMNS = ["dataset", "workers", "axis", "unit", "budget", "method", "seeds", "seeds_in_budget",
           "test_acc", "val_acc", "epochs", "ranked", "on_front"]
RULES = ("A run's accuracy within budget B: among its evaluated epochs whose cumulative bytes "
         "(or cumulative training time) is <= B, the test accuracy at the epoch of best "
         "validation accuracy (first best on a tie; the OGB protocol within the budget). A "
         "method's: the mean over its seeds, only when every seed was evaluated within B "
         "('–' if none was, 'k/n seeds' if only some). Budgets: per dataset and axis, "
         f"{N_BUDGETS} log-spaced from the smallest cumulative value at any run's first "
         "evaluated epoch (below it no method has a value) to the largest run total (at a "
         "run's last epoch) among the runs compared, rounded up to 3 significant digits: the "
         "low budgets are where methods differ; the last covers every run whole (= table 1). "
         "**Bold** = on the front: no other method reaches a higher accuracy within B (ties "
         "all bold). Only the methods with the most seeds compete for the front; one with "
         "fewer (a variant run at one seed) is shown as 'value (k seed)', never bold: a seed "
         "draws the split, so one seed's accuracy is not comparable with a mean over three. "
         "Only the largest worker count per dataset. Times: measured training "
         "time (evaluation excluded) on the shared reference cores, noisy; emulated times "
         "(runs with --emulate-network) are their own axis, never mixed with measured ones.\n")


def within_budget(metrics: pd.DataFrame, column: str, budget: float) -> dict | None:
    """One run's OGB result within ``budget`` of ``column``: {test_acc, val_acc, epochs} at the
    first evaluated epoch of best val_acc among those with ``column`` <= budget (x (1 + REL));
    None if none (a method's accuracy there is NaN, never 0)."""
    m = metrics[metrics["val_acc"].notna() & metrics[column].notna()
                & (metrics[column] <= budget * (1 + REL))]
    if m.empty:
        return None
    best = max(zip(m["val_acc"], -m["epoch"], m["test_acc"]))
    return {"test_acc": float(best[2]), "val_acc": float(best[0]), "epochs": int(-best[1]) + 1}


def _ceil3(x: float) -> float:
    """x rounded up to 3 significant digits (within REL: 0.30000000000000004 -> 0.3)."""
    if x <= 0:
        return 0.0
    y = float(f"{x:.3g}")
    if y < x * (1 - REL):
        y = float(f"{y + 10 ** (math.floor(math.log10(y)) - 2):.3g}")
    return y


def budgets(firsts, totals, n: int = N_BUDGETS) -> list[float]:
    """``n`` log-spaced budgets from the smallest positive first-evaluation value (``firsts``; the
    smallest positive total if none is) to the largest total, rounded up to 3 significant digits,
    distinct (duplicates after rounding dropped), ascending."""
    totals = [float(t) for t in totals if t == t]
    if not totals:
        return []
    hi = max(totals)
    positive = [float(f) for f in firsts if f == f and 0 < f <= hi] or [t for t in totals if t > 0]
    if not positive:
        return [0.0]
    lo = min(positive)
    raw = [hi] if lo == hi or n == 1 else list(np.geomspace(lo, hi, n))
    return sorted({_ceil3(b) for b in raw})


def _axes(record, time_column: str | None) -> list[tuple[str, str, str]]:
    """(axis name, metrics column, unit) for one run: its bytes and time axes, never mixed.
    ``time, measured`` is the wall_time (training time, evaluation excluded) of a run without
    ``summary.json["emulation"]``; a run with it (the emulated-cluster sweep) has its wall_time on
    ``time, emulated @ BANDWIDTH`` (the emulation's label) and its bytes on ``bytes, runs emulated
    @ BANDWIDTH``: one front per emulation. ``time_column=NAME`` adds ``time, emulated (NAME)``
    from that metrics column (cumulative seconds) for the runs that have it."""
    e = record.summary.get("emulation")
    if e:
        label = (e.get("label") or "emulated") if isinstance(e, dict) else "emulated"
        label = label if label.startswith("emulated") else f"emulated {label}"
        out = [(f"bytes, runs {label}", "cum_bytes", "B"), (f"time, {label}", "wall_time", "s")]
    else:
        out = [("bytes", "cum_bytes", "B"), ("time, measured", "wall_time", "s")]
    if time_column and time_column in record.metrics.columns \
            and record.metrics[time_column].notna().any():
        out.append((f"time, emulated ({time_column})", time_column, "s"))
    return [a for a in out if a[1] in record.metrics.columns]


def _selected(loaded: Loaded, workers) -> list:
    if workers == "all":
        return list(loaded.records)
    if workers == "max":
        top = {}
        for r in loaded.records:
            top[r.dataset] = max(top.get(r.dataset, r.workers), r.workers)
        return [r for r in loaded.records if r.workers == top[r.dataset]]
    return [r for r in loaded.records if r.workers == int(workers)]


def groups(loaded: Loaded, workers="max", time_column: str | None = None) -> dict:
    """{(dataset, workers, axis): (column, unit, {label: [records]})} in suite order. ``workers``:
    "max" (the default: per dataset, its largest worker count), "all" (one front per worker
    count, never mixed) or a count."""
    out: dict = {}
    axis_order: list = []
    for r in _selected(loaded, workers):
        for axis, column, unit in _axes(r, time_column):
            if axis not in axis_order:
                axis_order.append(axis)
            g = out.setdefault((r.dataset, r.workers, axis), (column, unit, {}))
            g[2].setdefault(r.label, []).append(r)
    order = {d: i for i, d in enumerate(loaded.datasets)}
    rank = {a: (0 if a == "bytes" else 1 if a == "time, measured" else 2, i)
            for i, a in enumerate(axis_order)}
    keys = sorted(out, key=lambda k: (order.get(k[0], len(order)), k[0], k[1], rank[k[2]]))
    labels = {label: i for i, label in enumerate(loaded.labels)}
    return {k: (out[k][0], out[k][1],
                dict(sorted(out[k][2].items(), key=lambda kv: labels.get(kv[0], len(labels)))))
            for k in keys}


def ranked_labels(by_label: dict) -> set:
    """The labels that compete for the front: those with the most seeds (RULES)."""
    most = max(len(recs) for recs in by_label.values())
    return {label for label, recs in by_label.items() if len(recs) == most}


def method_at(recs: list, column: str, budget: float) -> dict:
    """A method's row at a budget: the mean over its seeds when every seed has a value."""
    hits = [within_budget(r.metrics, column, budget) for r in recs]
    ok = [h for h in hits if h is not None]
    row = {"seeds": len(recs), "seeds_in_budget": f"{len(ok)}/{len(recs)}"}
    for key in ("test_acc", "val_acc", "epochs"):
        row[key] = sum(h[key] for h in ok) / len(ok) if len(ok) == len(recs) else float("nan")
    return row


def mark_front(accs: list) -> list[bool]:
    """On the front: a value (not NaN) within TIE of the largest value."""
    vals = [a for a in accs if a == a]
    if not vals:
        return [False] * len(accs)
    best = max(vals)
    return [a == a and a >= best - TIE for a in accs]


def pareto_table(loaded: Loaded, workers="max", time_column: str | None = None,
                 n: int = N_BUDGETS) -> pd.DataFrame:
    """pareto.csv: one row per (dataset, workers, axis, budget, method), by RULES."""
    rows = []
    for (dataset, w, axis), (column, unit, by_label) in groups(loaded, workers, time_column).items():
        runs = [r.metrics for recs in by_label.values() for r in recs]
        totals = [float(m[column].dropna().iloc[-1]) for m in runs if m[column].notna().any()]
        firsts = [float(m.loc[m["val_acc"].notna(), column].dropna().iloc[0]) for m in runs
                  if m.loc[m["val_acc"].notna(), column].notna().any()]
        ranked = ranked_labels(by_label)
        for b in budgets(firsts, totals, n):
            block = [{"dataset": dataset, "workers": w, "axis": axis, "unit": unit, "budget": b,
                      "method": label, **method_at(recs, column, b), "ranked": label in ranked}
                     for label, recs in by_label.items()]
            accs = [r["test_acc"] if r["ranked"] else float("nan") for r in block]
            for row, on in zip(block, mark_front(accs)):
                row["on_front"] = on
            rows += block
    return pd.DataFrame(rows, columns=COLUMNS)


def fronts(table: pd.DataFrame) -> dict:
    """The reading helper: {dataset: {axis: [(budget, unit, [methods on the front])]}}, budgets
    ascending, methods in the table's order (an empty list where no method has a value). A
    dataset compared at several worker counts (``workers="all"``) has its axes named
    "<axis> (M=<workers>)"."""
    out: dict = {}
    several = table.groupby("dataset", sort=False)["workers"].nunique().to_dict()
    for (dataset, w, axis, budget), part in table.groupby(["dataset", "workers", "axis", "budget"],
                                                          sort=False):
        name = f"{axis} (M={w})" if several[dataset] > 1 else axis
        on = part.loc[part["on_front"].astype(bool), "method"]
        out.setdefault(dataset, {}).setdefault(name, []).append(
            (float(budget), part["unit"].iloc[0], list(on)))
    return out


def run_curve(metrics: pd.DataFrame, column: str):
    """within_budget's test_acc as a step function of the budget, for the plots: (xs, tests) such
    that at budget B the value is tests[i] for the last i with xs[i] <= B (none: NaN). Needs
    ``column`` nondecreasing over the evaluated epochs (cumulative values are); None otherwise."""
    m = metrics[metrics["val_acc"].notna() & metrics[column].notna()].sort_values("epoch")
    xs = m[column].to_numpy(dtype=float)
    if len(xs) and (np.diff(xs) < 0).any():
        return None
    val, test = m["val_acc"].to_numpy(dtype=float), m["test_acc"].to_numpy(dtype=float)
    best = np.maximum.accumulate(val) if len(val) else val
    first = [int(np.argmax(val[: i + 1] == best[i])) for i in range(len(val))]  # first best so far
    return xs, test[first]


def curve_at(recs: list, column: str, grid: np.ndarray) -> np.ndarray:
    """A method's accuracy within each budget of ``grid`` (mean over seeds, NaN unless every seed
    has a value): method_at's test_acc, computed through run_curve."""
    ys = []
    for r in recs:
        c = run_curve(r.metrics, column)
        if c is None:  # not cumulative: the direct rule, budget by budget
            ys.append([within_budget(r.metrics, column, b) for b in grid])
            ys[-1] = np.array([h["test_acc"] if h else np.nan for h in ys[-1]])
            continue
        i = np.searchsorted(c[0], grid * (1 + REL), side="right") - 1
        ys.append(np.where(i >= 0, c[1][np.maximum(i, 0)], np.nan) if len(c[0]) else
                  np.full(len(grid), np.nan))
    return np.mean(ys, axis=0)  # NaN wherever some seed has none


def budget_grid(by_label: dict, column: str) -> np.ndarray:
    """The plots' budgets: every evaluated epoch's cumulative value of ``column`` in the runs of
    ``by_label`` (positive ones, where any is), up to the largest run total, ascending."""
    runs = [r.metrics for recs in by_label.values() for r in recs]
    evaluated = np.concatenate([m.loc[m["val_acc"].notna(), column].dropna().to_numpy(dtype=float)
                                for m in runs])
    hi = max([float(m[column].dropna().iloc[-1]) for m in runs] + [0.0])
    grid = np.unique(np.append(evaluated[(evaluated > 0) & (evaluated <= hi)], hi))
    return grid[grid > 0] if (grid > 0).any() else grid


def axis_curves(by_label: dict, column: str) -> tuple:
    """One axis of the figure: (its budgets, the ranked labels, each label's accuracy within
    every budget, the front: the best of the ranked at every budget)."""
    budgets = budget_grid(by_label, column)
    ranked = ranked_labels(by_label)
    ys = {label: curve_at(recs, column, budgets) for label, recs in by_label.items()}
    envelope = np.full(len(budgets), np.nan)
    for label in ranked:
        envelope = np.fmax(envelope, ys[label])
    return budgets, ranked, ys, envelope
