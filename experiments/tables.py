"""Paper-style tables from complete runs (docs/methods.md section 7), as CSV and markdown:

    python -m experiments.tables --suite quick --runs results/quick/runs --out results/quick \
        [--network 10gbit,5us] [--target 0.98,0.99,0.995]

accuracy.csv, epoch_time.csv, time_to_accuracy.csv, bytes.csv, method_state.csv (each method's
own metrics columns and peak memory: experiments/method_state.py), runs.csv, pareto.csv (best test
accuracy within budgets of bytes and of time, the front marked: experiments/pareto.py) and tables.md (whose
header names the machine, versions, commit and commands, read from the runs' summary.json); when
some run has stragglers (``--slow-workers``), also straggler.csv (pace of the fast and the slow
workers, total time, accuracy, staleness observed); when the suite ran the timing protocol (rounds
or an A/A label: experiments/timing.py), also timing.csv and timing_tta.csv (paired speedups with
their interval and the A/A noise floor), which sections 2 and 3 of tables.md then print, and,
where the A/A label ran at several seeds, timing_floor_seeds.csv (its floor at each seed apart).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from . import cluster, method_state, pareto, periods, report, timing
from .suites.suite import exact_for, is_exact
from .costmodel import Network, modeled_epoch_times, parse_network
from .suites.load import Loaded, load

MiB = 2**20
NOT_REACHED = "not reached"
CATEGORIES = {"bytes_halo_fwd": "halo fwd", "bytes_halo_bwd": "halo bwd",
              "bytes_store": "store", "bytes_params": "params",
              "bytes_feat_fetch": "feature fetch"}  # the last: mini-batch runs that fetch only


def run_frame(loaded: Loaded, net: Network | None = None) -> pd.DataFrame:
    """One row per run: identity, accuracy, per-epoch time (the mean over the run's window of
    whole periods after the warm-up, experiments/periods.py), mean bytes per epoch by category."""
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
        for col in [c for c in m.columns if c.startswith("bytes_") and "_w" not in c]:
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


TARGETS = (0.98, 0.99, 0.995)  # fractions of exact's best val: beside 0.98, stricter ones,
# which a coarse evaluation or a method that plateaus just below exact cannot fake


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


def time_to_accuracy(loaded: Loaded, fraction: float = 0.98, net: Network | None = None) -> pd.DataFrame:
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


def _stat(summary: dict, metrics: pd.DataFrame, key: str, fn: str):
    """Staleness over the run: DIGEST-A's summary (over every applied step), else the metrics
    column's mean / max (synchronous methods: every worker at the same step), else None."""
    if summary.get(f"{key}_{fn}") is not None:
        return summary[f"{key}_{fn}"]
    col = metrics[key].dropna() if key in metrics.columns else pd.Series(dtype=float)
    return float(getattr(col, fn)()) if len(col) else None


def _get(summary: dict, key: str, default):
    return default if summary.get(key) is None else summary[key]


def straggler(loaded: Loaded) -> pd.DataFrame:
    """One row per run (the straggler comparison: does DIGEST-A keep its pace?). A worker's "epoch" is one of its own
    steps (a forward/backward over its partition). Synchronous methods: every worker takes every
    step, so fast and slow workers alike run epochs / total training time steps/s (the stragglers'
    sleep inside it: everyone waits for them). DIGEST-A: per worker, gradients the server applied
    / that worker's training time (summary.json), mean over the workers not slowed (fast) and the
    slowed ones (slow); its ``epochs/s`` counts server epochs (M gradients applied). Parameter
    staleness of a synchronous all-reduce is 0; representation staleness = age of the halo rows
    used, in their owners' steps. ``grad_share_by_worker``: each worker's fraction of the gradients
    applied (DIGEST-A: its applied steps / all; synchronous: 1/M each). ``fast vs sync`` = fast
    steps/s / those of the synchronous
    ``digest`` run with the same stragglers, dataset, M and seed."""
    rows = []
    for r in loaded.records:
        s, m = r.summary, r.metrics
        cfg = s.get("config", {})
        epochs = len(m)
        total = s.get("total_train_time") or float(m["epoch_time"].sum())
        factors = s.get("slow_factor_by_worker") or []
        slowed = any(f > 1 for f in factors) or bool(cfg.get("slow_workers"))
        synchronous = "server_epochs_per_s" not in s  # DIGEST-A and its variants: no
        rows.append({
            "dataset": r.dataset, "method": r.label, "algorithm": r.method, "workers": r.workers,
            "seed": r.seed, "slow_workers": cfg.get("slow_workers") or "none",
            "steps_by_worker": "/".join(str(n) for n in s.get("steps_by_worker") or [epochs] * r.workers),
            "grad_share_by_worker": "/".join(f"{x:.2f}" for x in _shares(s, epochs, r.workers)),
            "fast_steps_per_s": _get(s, "steps_per_s_fast", epochs / total),
            "slow_steps_per_s": _get(s, "steps_per_s_slow", epochs / total) if slowed else None,
            "epochs_per_s": epochs / total, "total_time_s": total,
            "test_at_best_val": s.get("test_at_best_val"),
            "final_test": (s.get("final") or {}).get("test_acc"),
            "staleness_param_mean": 0.0 if synchronous and cfg.get("local_steps", 1) <= 1
            else _stat(s, m, "staleness_param", "mean"),
            "staleness_param_max": 0.0 if synchronous and cfg.get("local_steps", 1) <= 1
            else _stat(s, m, "staleness_param", "max"),
            "staleness_repr_mean": _stat(s, m, "staleness_repr", "mean"),
            "staleness_repr_max": _stat(s, m, "staleness_repr", "max")})
    out = pd.DataFrame(rows)
    base = {(d, w, sd, sw): f for d, a, w, sd, sw, f in zip(
        out.dataset, out.algorithm, out.workers, out.seed, out.slow_workers, out.fast_steps_per_s)
        if a == "digest"}
    out["fast_vs_sync"] = [f / base[k] if k in base else float("nan") for k, f in zip(
        zip(out.dataset, out.workers, out.seed, out.slow_workers), out.fast_steps_per_s)]
    return out


def _shares(summary: dict, epochs: int, workers: int) -> list:
    """Each worker's share of the gradients applied: DIGEST-A's summary, else from its steps (a
    synchronous method: every worker supplies one of the M gradients of every step)."""
    if summary.get("grad_share_by_worker"):
        return summary["grad_share_by_worker"]
    steps = summary.get("steps_by_worker") or [epochs] * workers
    return [n / max(1, sum(steps)) for n in steps]


def has_stragglers(loaded: Loaded) -> bool:
    return any(r.summary.get("config", {}).get("slow_workers") for r in loaded.records)


def time_to_accuracies(loaded: Loaded, fractions=TARGETS, net: Network | None = None) -> pd.DataFrame:
    """``time_to_accuracy`` at every target fraction, one block of rows per fraction."""
    fractions = (fractions,) if isinstance(fractions, (int, float)) else tuple(fractions)
    return pd.concat([time_to_accuracy(loaded, f, net) for f in fractions], ignore_index=True)


def parse_targets(text: str) -> tuple:
    """'0.98,0.99,0.995' -> (0.98, 0.99, 0.995); each in (0, 1]."""
    out = tuple(float(x) for x in str(text).split(",") if x.strip())
    if not out or not all(0 < f <= 1 for f in out):
        raise ValueError(f"--target wants fractions in (0, 1], comma-separated, got {text!r}")
    return out


def build(loaded: Loaded, net: Network | None = None, fraction=TARGETS,
          emulated_time: str | None = None) -> dict:
    frame = run_frame(loaded, net)
    out = {"accuracy": accuracy(frame), "epoch_time": epoch_time(frame, net),
           "time_to_accuracy": time_to_accuracies(loaded, fraction, net),
           "bytes": bytes_per_epoch(frame), "method_state": method_state.table(loaded),
           "runs": report.runs_index(loaded)}
    if has_stragglers(loaded):
        out["straggler"] = straggler(loaded)
    out["pareto"] = pareto.pareto_table(loaded, time_column=emulated_time)
    if cluster.emulated(loaded):  # --emulate-network runs: the sweep's own tables
        out.update(cluster.build(loaded, out["time_to_accuracy"]))
    out.update(timing.build(loaded, fraction))  # suites with rounds or an A/A label only
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.tables", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True, help="runs root written by experiments.runner")
    p.add_argument("--suite", default=None, help="read exactly this suite's runs (else every complete run)")
    p.add_argument("--out", required=True, help="folder for the CSVs and tables.md")
    p.add_argument("--network", default=None, help="add modeled columns, e.g. 10gbit,5us")
    p.add_argument("--target", type=parse_targets, default=TARGETS,
                   help="fraction(s) of exact's best val, comma-separated (default: "
                   + ",".join(f"{t:g}" for t in TARGETS) + ")")
    p.add_argument("--emulated-time", default=None, metavar="COLUMN",
                   help="pareto.csv: also a time axis from this metrics column (cumulative "
                   "emulated seconds), labelled emulated")
    args = p.parse_args(argv)
    net = parse_network(args.network) if args.network else None
    loaded = load(args.runs, args.suite)
    if not loaded.records:
        print(f"tables: no complete runs under {args.runs}", file=sys.stderr)
        return 1
    command = os.environ.get("RUN_ALL_COMMAND") or "python -m experiments.tables " + " ".join(
        sys.argv[1:] if argv is None else argv)
    written = write(loaded, Path(args.out), net, args.target, command, args.emulated_time)
    print(f"tables: {loaded.done} runs -> {args.out}/" + ", ".join(written))
    return 0


def write(loaded: Loaded, out: Path, net: Network | None, targets, command: str,
          emulated_time: str | None = None) -> list[str]:
    """Every table of ``loaded`` into ``out``: one CSV per table and tables.md; their names."""
    tables = build(loaded, net, targets, emulated_time)
    out.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        df.to_csv(out / f"{name}.csv", index=False, float_format="%.6g")
    (out / "tables.md").write_text(report.markdown(loaded, tables, net, targets, command))
    return ["tables.md", *(f"{name}.csv" for name in tables)]


if __name__ == "__main__":
    sys.exit(main())
