"""The paper-style tables of a suite as frames (docs/methods.md section 7): accuracy, per-epoch time
and speedup over exact, time to accuracy, bytes per epoch by category, every run's identity
(runs.csv), and ``build``: every table a suite's runs give (tables.md renders them:
experiments/render/report.py; ``python -m experiments.tables`` writes them).

Per-epoch time is a run's mean over its window of whole periods after the warm-up
(experiments/analysis/periods.py); a speedup is exact's time over the method's at the same dataset,
M, emulated network and model (``suite.exact_for``)."""
from __future__ import annotations

import pandas as pd

from digest.advise.protocol import TARGETS
from digest.training import record

from .costmodel import Network, modeled_epoch_times
from ..suites.load import Loaded
from ..suites.suite import exact_for, is_exact
from . import budget, cluster, fit, method_state, pareto, periods, timing
from .straggler import has_stragglers, straggler

MiB = 2**20
NOT_REACHED = "not reached"
CATEGORIES = {"bytes_halo_fwd": "halo fwd", "bytes_halo_bwd": "halo bwd",
              "bytes_store": "store", "bytes_params": "params",
              "bytes_feat_fetch": "feature fetch"}  # the last: mini-batch runs that fetch only


def run_frame(loaded: Loaded, net: Network | None = None) -> pd.DataFrame:
    """One row per run: identity, accuracy, per-epoch time (the mean over the run's window of
    whole periods after the warm-up, experiments/analysis/periods.py), mean bytes per epoch by category."""
    rows = []
    for r in loaded.records:
        m = r.metrics
        timed = periods.timed_rows(m, r.summary.get("config", {}), loaded.warmup)
        row = {"dataset": r.dataset, "method": r.label, "workers": r.workers, "seed": r.seed,
               "best_val": r.summary.get("best_val"), "test": r.summary.get("test_at_best_val"),
               "epoch_time": timed["epoch_time"].mean(), "epochs": len(m),
               "commit": (r.summary.get("git_commit") or "").removesuffix("-dirty")}
        if net is not None:
            row["modeled_epoch_time"] = modeled_epoch_times(timed, net).mean()
        for col in [c for c in m.columns if record.is_bytes(c) and not record.is_per_worker(c)]:
            row[col] = m[col].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def mean_std(values) -> str:
    """'97.50 ± 0.71' in percent (sample std over seeds); just the mean for one seed."""
    v = pd.Series(list(values), dtype=float) * 100
    return f"{v.mean():.2f}" if len(v) == 1 else f"{v.mean():.2f} ± {v.std(ddof=1):.2f}"


def accuracy(frame: pd.DataFrame) -> pd.DataFrame:
    g = frame.groupby(["dataset", "method", "workers"], sort=False)
    return g.agg(seeds=("test", "size"), test_mean=("test", "mean"), test_std=("test", "std"),
                 best_val_mean=("best_val", "mean"),
                 test_at_best_val=("test", mean_std)).reset_index()


def speedup(table: pd.DataFrame, column: str) -> list:
    """exact's ``column`` at the same dataset and M (and emulated network, for a label
    "<method>@<bandwidth>"; and model, for a label "sage-<method>": ``exact_for``) / the
    method's (one value per table row)."""
    exact = {(d, m, w): t for d, m, w, t in zip(table.dataset, table.method, table.workers,
                                                table[column]) if is_exact(m)}
    return [exact[k] / t if (k := (d, exact_for(m), w)) in exact and t > 0 else float("nan")
            for d, m, w, t in zip(table.dataset, table.method, table.workers, table[column])]


def measured_apart(frame: pd.DataFrame, table: pd.DataFrame) -> list:
    """Per table row: True when none of the method's runs ran at a commit that one of exact's
    runs (same dataset, M, network, model) ran at, i.e. they were made at different times, under
    whatever load each time had: their ratio is not a paired comparison (RUNLOG.md says when)."""
    commits = frame.groupby(["dataset", "method", "workers"])["commit"].agg(set).to_dict()
    return [not is_exact(m) and (d, exact_for(m), w) in commits
            and not commits[(d, m, w)] & commits[(d, exact_for(m), w)]
            for d, m, w in zip(table.dataset, table.method, table.workers)]


def epoch_time(frame: pd.DataFrame, net: Network | None = None) -> pd.DataFrame:
    """Mean (over seeds) of each run's mean epoch time, in ms, and the speedup over exact."""
    g = frame.groupby(["dataset", "method", "workers"], sort=False)
    out = g.agg(seeds=("epoch_time", "size"), epoch_ms=("epoch_time", "mean")).reset_index()
    out["epoch_ms"] *= 1e3
    out["speedup_vs_exact"] = speedup(out, "epoch_ms")
    out["measured_apart"] = measured_apart(frame, out)
    if net is not None:
        out[f"{net.column} epoch_ms"] = g["modeled_epoch_time"].mean().to_numpy() * 1e3
        out[f"{net.column} speedup_vs_exact"] = speedup(out, f"{net.column} epoch_ms")
    return out




def eval_gap(metrics: pd.DataFrame) -> int:
    """The largest spacing (epochs) between consecutive evaluations of a run, the first counted
    from the start: the granularity of its time to accuracy (an epoch reached between two
    evaluations is reported at the second)."""
    done = sorted(int(e) + 1 for e in metrics.loc[metrics["val_acc"].notna(), "epoch"])
    return max((b - a for a, b in zip([0] + done, done)), default=0)


def time_to_target(metrics: pd.DataFrame, target: float, net: Network | None = None) -> dict | None:
    """First epoch whose val_acc >= target: epochs run, cumulative wall time and bytes; or None."""
    hit = metrics.index[metrics["val_acc"].notna() & (metrics["val_acc"] >= target)]
    if len(hit) == 0:
        return None
    i = hit[0]
    out = {"epochs": int(metrics.loc[i, "epoch"]) + 1, "time": float(metrics.loc[i, "wall_time"]),
           "bytes": float(metrics.loc[i, "cum_bytes"])}
    if net is not None:
        out["modeled"] = float(modeled_epoch_times(metrics, net).cumsum().loc[i])
    return out


def time_to_accuracy(loaded: Loaded, fraction: float = TARGETS[0], net: Network | None = None) -> pd.DataFrame:
    """Per dataset, method, M: time for the method to first reach fraction x exact's best val (mean
    over seeds of exact at that M); its speedup over exact; "not reached" unless every seed got there."""
    exact_best: dict = {}  # by (dataset, exact's label, M): the same emulated network, if any
    for r in loaded.records:
        if is_exact(r.label):
            exact_best.setdefault((r.dataset, r.label, r.workers), []).append(r.summary["best_val"])
    groups: dict = {}
    for r in loaded.records:
        if (r.dataset, exact_for(r.label), r.workers) in exact_best:
            groups.setdefault((r.dataset, r.label, r.workers), []).append(r)
    kinds = [("time", "time_s")] + ([("modeled", f"{net.column} time_s")] if net else [])
    rows = []
    for (dataset, label, workers), recs in groups.items():
        best = exact_best[(dataset, exact_for(label), workers)]
        target = fraction * sum(best) / len(best)
        hits = [time_to_target(r.metrics, target, net) for r in recs]
        ok = [h for h in hits if h is not None]
        reached = len(ok) == len(hits)
        row = {"dataset": dataset, "method": label, "workers": workers, "target": fraction,
               "target_val": target, "seeds_reached": f"{len(ok)}/{len(hits)}",
               "eval_every": max(eval_gap(r.metrics) for r in recs)}
        for key, col in [("epochs", "epochs"), ("bytes", "MiB"), *kinds]:
            mean = sum(h[key] for h in ok) / len(ok) if reached else None
            row[col] = NOT_REACHED if mean is None else mean / (MiB if key == "bytes" else 1)
        rows.append(row)
    out = pd.DataFrame(rows, columns=["dataset", "method", "workers", "target", "target_val",
                                      "seeds_reached", "eval_every", "epochs", "MiB",
                                      *(col for _, col in kinds)])
    for _, col in kinds:  # speedup = exact's time / the method's, same dataset, M and network
        base = {(d, m, w): t for d, m, w, t in zip(out.dataset, out.method, out.workers, out[col])
                if is_exact(m)}
        out[col.replace("time_s", "speedup_vs_exact")] = [
            _ratio(base.get((d, exact_for(m), w), NOT_REACHED), t)
            for d, m, w, t in zip(out.dataset, out.method, out.workers, out[col])]
    return out


def _ratio(exact_time, time):
    if time == NOT_REACHED:
        return NOT_REACHED
    return "n/a (exact not reached)" if exact_time == NOT_REACHED else exact_time / time


def bytes_per_epoch(frame: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in CATEGORIES if c in frame.columns]
    # a category some runs lack (feature fetch) is 0 bytes there, not unknown
    g = frame.fillna({c: 0 for c in cols}).groupby(["dataset", "method", "workers"], sort=False)
    out = (g[cols + ["bytes_total"]].mean() / MiB).rename(
        columns={**{c: f"{n} MiB" for c, n in CATEGORIES.items()}, "bytes_total": "total MiB"})
    return out.reset_index()


def bytes_by_category(frame: pd.DataFrame) -> pd.DataFrame:
    """MiB sent per epoch by category (the columns: those of CATEGORIES the runs have), mean over
    seeds, indexed by (method, workers); a category some runs lack is 0 bytes there."""
    cats = [c for c in CATEGORIES if c in frame.columns]
    frame = frame.fillna({c: 0 for c in cats})
    return frame.groupby(["method", "workers"], sort=False)[cats].mean() / MiB


def time_to_accuracies(loaded: Loaded, fractions=TARGETS, net: Network | None = None) -> pd.DataFrame:
    """``time_to_accuracy`` at every target fraction, one block of rows per fraction."""
    fractions = (fractions,) if isinstance(fractions, (int, float)) else tuple(fractions)
    return pd.concat([time_to_accuracy(loaded, f, net) for f in fractions], ignore_index=True)


def build(loaded: Loaded, net: Network | None = None, fraction=TARGETS,
          emulated_time: str | None = None) -> dict:
    frame = run_frame(loaded, net)
    out = {"accuracy": accuracy(frame), "epoch_time": epoch_time(frame, net),
           "time_to_accuracy": time_to_accuracies(loaded, fraction, net),
           "bytes": bytes_per_epoch(frame), "method_state": method_state.table(loaded),
           "runs": runs_index(loaded)}
    if has_stragglers(loaded):
        out["straggler"] = straggler(loaded)
    out["pareto"] = pareto.pareto_table(loaded, time_column=emulated_time)
    if loaded.fit_epochs:
        out["fit"] = fit.table(loaded)
    if loaded.budgets:
        out["budget"] = budget.table(loaded)
    if cluster.emulated(loaded):  # --emulate-network runs: the sweep's own tables
        out.update(cluster.build(loaded, out["time_to_accuracy"]))
    out.update(timing.build(loaded, fraction))  # suites with rounds or an A/A label only
    return out


def runs_index(loaded: Loaded) -> pd.DataFrame:
    """runs.csv: every run's identity, command and own results, so per-seed comparisons (paired
    by seed) can be read from committed files, not only the means of the other tables."""
    rounds = bool(loaded.later)  # a suite with rounds: each run's round, after its seed
    return pd.DataFrame([{"dataset": r.dataset, "method": r.label, "workers": r.workers,
                          "seed": r.seed, **({"round": r.round} if rounds else {}),
                          "best_val": r.summary.get("best_val"),
                          "test_at_best_val": r.summary.get("test_at_best_val"),
                          "mean_epoch_time": r.metrics["epoch_time"].mean(),
                          "directory": str(r.directory), "git_commit": r.summary.get("git_commit"),
                          "command": r.summary.get("command")} for r in timing.every_round(loaded)])

