"""Speedups that survive a noisy machine (docs/methods.md section 11): paired, same-round ratios
with a bootstrap interval, beside an A/A noise floor that is itself checked; time to accuracy on
the training clock.

A suite with rounds (``rounds: R``, experiments/suites/suite.py) runs every method R times at each
point (dataset, emulated network, M, seed), the methods of a round back to back in a seeded random
order (experiments/suites/schedule.py). Here:

- **Per-epoch time** = the mean epoch time over a timed window of whole periods after the warm-up
  (experiments/analysis/periods.py): never a median, which drops the epochs that pay a periodic method's
  refresh, averaging or re-assignment.
- **Pairs.** A method's run is paired with its exact run (``config.exact_for``: same network and
  model) at the same dataset, M, seed and round, both timed over the window of the pair's period;
  the pair's ratio is t_exact / t_method.
- **Speedup** = the MEAN of the pairs' ratios; its 95% interval: a percentile bootstrap
  (``REPLICATES`` replicates, a fixed seed, so the tables are reproducible; its percentiles
  widened for few pairs, experiments/analysis/paired.py ``tails``) over the pairs, that is over
  rounds and seeds; epochs inside a run are never resampled (that understates the spread). With
  fewer than two pairs there is no interval and no verdict; with fewer than ``MIN_PAIRS`` the
  tables say so beside the interval.
- **A/A, an equivalence test.** ``exact-aa`` (``aa: true``) is exact under a second label, paired
  with exact like any method: its interval is the noise floor at that point. A point is clean
  when that interval lies inside [0.95, 1.05]; elsewhere its rows get no verdict ("A/A not
  clean"). At a clean point the verdict follows from the interval: "faster" ("slower") where it
  lies wholly above (below) the A/A interval, "no measurable difference" where it overlaps it.
- **Training clock.** Time to accuracy = the sum of the epoch times up to the first epoch whose
  validation accuracy reaches the target (metrics.csv's ``epoch_time``: the slowest worker's
  step, evaluation excluded; ``eval_time`` records the evaluation apart), every epoch counted
  (the warm-up is training time too); its paired speedup is bootstrapped over pairs alone.

``applies``: only suites with rounds or an A/A label get these tables, so the committed tables
of every other suite stay as they were.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..suites.load import Loaded, RunRecord
from ..suites.suite import aa_label, exact_for, is_aa, is_exact
from . import periods, rule_change
from .paired import (AA_BAND, LEVEL, MIN_PAIRS, NOT_CLEAN, NO_DIFFERENCE, ONE_PAIR, REPLICATES,  # noqa: F401
                     SEED, Interval, clean, few_pairs, half_width_pct, paired_ratio, verdict)

NOT_REACHED = "not reached"
VERDICT_WORDS = ("faster", "slower", NOT_CLEAN, ONE_PAIR)  # printed beside a ratio


# -- reading runs -------------------------------------------------------------------------------
def applies(loaded: Loaded) -> bool:
    """Whether the suite ran the timing protocol: later rounds, or an A/A label."""
    return bool(loaded.later) or any(is_aa(r.label) for r in loaded.records)


def every_round(loaded: Loaded) -> list[RunRecord]:
    return list(loaded.records) + list(loaded.later)


def _median(values) -> float:
    values = [v for v in values if not np.isnan(v)]
    return float(np.median(values)) if values else float("nan")


def _mean(values) -> float:
    values = [v for v in values if not np.isnan(v)]
    return float(np.mean(values)) if values else float("nan")


def period(r: RunRecord) -> int | None:
    """A run's period in epochs (experiments/analysis/periods.py), from its recorded config."""
    return periods.period(r.summary.get("config", {}))


def own_window(r: RunRecord, warmup: int) -> periods.Window:
    """The timed window of one run alone (its own period)."""
    return periods.window(len(r.metrics), warmup, period(r))


def run_time(r: RunRecord, warmup: int) -> float:
    """A run's per-epoch time (s): the mean over its own window."""
    t = periods.times(r.metrics, own_window(r, warmup))
    return float(t.mean()) if len(t) else float("nan")


def train_clock(metrics: pd.DataFrame) -> pd.Series:
    """Seconds of training at the end of each epoch: the running sum of the epoch times
    (evaluation excluded)."""
    return metrics["epoch_time"].cumsum()


def _key(r: RunRecord) -> tuple:
    return r.dataset, r.label, r.workers


def _pairs(records: list[RunRecord]) -> dict:
    """{(dataset, label, M): [(exact's run, the method's run), ...]}, paired by seed and round;
    the exact label itself is left out."""
    runs = {(r.dataset, r.label, r.workers, r.seed, r.round): r for r in records}
    out: dict = {}
    for r in records:
        ref = runs.get((r.dataset, exact_for(r.label), r.workers, r.seed, r.round))
        if not is_exact(r.label):
            out.setdefault(_key(r), [])
            if ref is not None:
                out[_key(r)].append((ref, r))
    return out


def pair_window(a: RunRecord, b: RunRecord, warmup: int) -> periods.Window:
    """The window both runs of a pair are timed over: whole periods of both."""
    return periods.window(min(len(a.metrics), len(b.metrics)), warmup,
                          periods.joint(period(a), period(b)))


def _timed_pairs(pairs: list, warmup: int) -> list:
    """(exact's run, the method's run) pairs -> their epoch times over the pair's window, as
    ``paired_ratio`` takes them."""
    out = []
    for a, b in pairs:
        win = pair_window(a, b, warmup)
        out.append((periods.times(a.metrics, win), periods.times(b.metrics, win)))
    return out


def _floor_key(key: tuple) -> tuple:
    """The A/A row a row is judged against: same dataset, M, network and model."""
    dataset, label, workers = key
    return dataset, aa_label(exact_for(label)), workers


def _judge(rows: list[dict], intervals: dict) -> None:
    """Fill each row's floor and verdict from the A/A interval at its point."""
    for row in rows:
        key = (row["dataset"], row["method"], row["workers"])
        iv, floor = intervals.get(key), intervals.get(_floor_key(key))
        if is_exact(row["method"]):
            row["verdict"], row["floor"] = "reference", ""
        elif is_aa(row["method"]):
            row["verdict"], row["floor"] = "A/A (noise floor)", ""
        elif isinstance(row["speedup"], str):
            row["verdict"], row["floor"] = row["speedup"], ""
        else:
            row["verdict"] = verdict(iv, floor)
            row["floor"] = "A/A" if floor is not None else "1 (no A/A run)"
        if floor is not None:
            row["aa"], row["aa_lo"], row["aa_hi"] = floor.mean, floor.lo, floor.hi


# -- the tables ---------------------------------------------------------------------------------
EPOCH_COLUMNS = ["dataset", "method", "workers", "runs", "seeds", "rounds", "pairs", "warmup",
                 "timed_epochs", "epoch_ms", "speedup", "speedup_lo", "speedup_hi", "aa",
                 "aa_lo", "aa_hi", "floor", "verdict"]


def epoch_speedups(loaded: Loaded, replicates: int = REPLICATES) -> pd.DataFrame:
    """timing.csv: per dataset, method and M, the per-epoch time (ms; the mean over the runs of
    each run's mean over its window: ``timed_epochs`` says which) and the paired per-epoch speedup
    over exact with its interval, the A/A mean and interval at that point and the verdict."""
    records, warmup = every_round(loaded), loaded.warmup
    groups: dict = {}
    for r in records:
        groups.setdefault(_key(r), []).append(r)
    pairs = _pairs(records)
    rows, intervals = [], {}
    for key, runs in groups.items():
        dataset, label, workers = key
        iv = None if is_exact(label) else paired_ratio(_timed_pairs(pairs[key], warmup), replicates)
        if iv is not None:
            intervals[key] = iv
        windows = sorted({periods.describe(own_window(r, warmup), period(r)) for r in runs})
        rows.append({"dataset": dataset, "method": label, "workers": workers, "runs": len(runs),
                     "seeds": len({r.seed for r in runs}), "rounds": len({r.round for r in runs}),
                     "pairs": 0 if is_exact(label) else len(pairs[key]), "warmup": warmup,
                     "timed_epochs": " / ".join(windows),
                     "epoch_ms": 1e3 * _mean([run_time(r, warmup) for r in runs]),
                     "speedup": 1.0 if is_exact(label) else (iv.mean if iv else float("nan")),
                     "speedup_lo": iv.lo if iv else float("nan"),
                     "speedup_hi": iv.hi if iv else float("nan"),
                     "aa": float("nan"), "aa_lo": float("nan"), "aa_hi": float("nan")})
    _judge(rows, intervals)
    return pd.DataFrame(rows, columns=EPOCH_COLUMNS)


SEED_FLOOR_COLUMNS = ["dataset", "method", "workers", "seed", "pairs", "aa", "aa_lo", "aa_hi",
                      "half_width_pct"]


def seed_floors(loaded: Loaded, replicates: int = REPLICATES) -> pd.DataFrame:
    """timing_floor_seeds.csv: the A/A interval at each seed apart (its rounds' pairs alone), for
    a suite whose A/A label ran at more than one seed; timing.csv's floor pools the seeds. Empty
    where every A/A point has one seed (there the two are the same)."""
    records = every_round(loaded)
    pairs = _pairs(records)
    rows = []
    for (dataset, label, workers), both in pairs.items():
        seeds = sorted({b.seed for _, b in both})
        if not is_aa(label) or len(seeds) < 2:
            continue
        for seed in seeds:
            iv = paired_ratio(_timed_pairs([(a, b) for a, b in both if b.seed == seed],
                                           loaded.warmup), replicates)
            if iv is not None:
                rows.append({"dataset": dataset, "method": label, "workers": workers,
                             "seed": seed, "pairs": iv.pairs, "aa": iv.mean, "aa_lo": iv.lo,
                             "aa_hi": iv.hi, "half_width_pct": half_width_pct(iv.lo, iv.hi)})
    return pd.DataFrame(rows, columns=SEED_FLOOR_COLUMNS)


def time_to_target(metrics: pd.DataFrame, target: float) -> dict | None:
    """The first epoch whose val_acc >= target: its training-clock time (s), the evaluation
    seconds left out up to it, epochs run; None if never."""
    hit = metrics.index[metrics["val_acc"].notna() & (metrics["val_acc"] >= target)]
    if len(hit) == 0:
        return None
    i = hit[0]
    evals = metrics["eval_time"].loc[:i].sum() if "eval_time" in metrics.columns else float("nan")
    return {"time": float(train_clock(metrics).loc[i]), "eval": float(evals),
            "epochs": int(metrics.loc[i, "epoch"]) + 1}


TTA_COLUMNS = ["target", "dataset", "method", "workers", "target_val", "runs", "reached", "pairs",
               "epochs", "train_s", "eval_s_excluded", "speedup", "speedup_lo", "speedup_hi", "aa",
               "aa_lo", "aa_hi", "floor", "verdict"]


def tta_speedups(loaded: Loaded, fractions, replicates: int = REPLICATES) -> pd.DataFrame:
    """timing_tta.csv: per target fraction, dataset, method and M, the time to accuracy on the
    training clock (median over runs; the evaluation seconds it leaves out beside it) and its
    paired speedup over exact (mean over pairs, bootstrap over pairs), judged against the A/A
    row's. The target is that of tables.time_to_accuracy: the fraction x the mean best val of
    exact's round-0 runs (one per seed) at the same dataset and M."""
    fractions = (fractions,) if isinstance(fractions, (int, float)) else tuple(fractions)
    best: dict = {}
    for r in loaded.records:
        if is_exact(r.label):
            best.setdefault((r.dataset, r.label, r.workers), []).append(r.summary["best_val"])
    records = every_round(loaded)
    groups: dict = {}
    for r in records:
        if (r.dataset, exact_for(r.label), r.workers) in best:
            groups.setdefault(_key(r), []).append(r)
    pairs = _pairs(records)
    rows = []
    for fraction in fractions:
        block, intervals = [], {}
        for key, runs in groups.items():
            dataset, label, workers = key
            vals = best[(dataset, exact_for(label), workers)]
            target = fraction * sum(vals) / len(vals)
            hits = [time_to_target(r.metrics, target) for r in runs]
            ok = [h for h in hits if h is not None]
            row = {"target": fraction, "dataset": dataset, "method": label, "workers": workers,
                   "target_val": target, "runs": len(runs), "reached": f"{len(ok)}/{len(hits)}",
                   "pairs": 0 if is_exact(label) else len(pairs[key]),
                   "epochs": _median([h["epochs"] for h in ok]) if len(ok) == len(hits)
                   else NOT_REACHED,
                   "train_s": float(np.median([h["time"] for h in ok])) if len(ok) == len(hits)
                   else NOT_REACHED,
                   "eval_s_excluded": _median([h["eval"] for h in ok]) if len(ok) == len(hits)
                   else float("nan"),
                   "speedup_lo": float("nan"), "speedup_hi": float("nan"),
                   "aa": float("nan"), "aa_lo": float("nan"), "aa_hi": float("nan")}
            if is_exact(label):
                row["speedup"] = 1.0 if len(ok) == len(hits) else NOT_REACHED
            elif len(ok) < len(hits):
                row["speedup"] = NOT_REACHED
            else:
                times = [(time_to_target(a.metrics, target), time_to_target(b.metrics, target))
                         for a, b in pairs[key]]
                if any(a is None for a, _ in times):
                    row["speedup"] = "n/a (exact not reached)"
                else:
                    iv = paired_ratio([([a["time"]], [b["time"]]) for a, b in times], replicates)
                    row["speedup"] = iv.mean if iv else float("nan")
                    if iv:
                        row["speedup_lo"], row["speedup_hi"] = iv.lo, iv.hi
                        intervals[key] = iv
            block.append(row)
        _judge(block, intervals)
        rows += block
    return pd.DataFrame(rows, columns=TTA_COLUMNS)


def evaluated_once(loaded: Loaded) -> bool:
    """Whether every run was evaluated at most once (a speed suite: evaluated at its last epoch
    only), so that no run has a curve to read a time to accuracy from."""
    return all(r.metrics["val_acc"].notna().sum() <= 1 for r in every_round(loaded))


def build(loaded: Loaded, fractions) -> dict:
    """The timing protocol's tables, {} for a suite that did not run it; no time-to-accuracy
    table for a suite whose runs were evaluated once."""
    if not applies(loaded):
        return {}
    out = {"timing": epoch_speedups(loaded)}
    out["timing_rule_change"] = rule_change.table(loaded, every_round(loaded), out["timing"])
    seeds = seed_floors(loaded)
    if not seeds.empty:  # the A/A ran at several seeds: its floor at each apart
        out["timing_floor_seeds"] = seeds
    if not evaluated_once(loaded):
        out["timing_tta"] = tta_speedups(loaded, fractions)
    return out
