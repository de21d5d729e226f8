"""The verdict (docs/methods.md section 12): which method reaches exact's accuracy first behind a
network, and what it gives up. Pure analysis: frames from loaded suites, no markdown, no files.

A graph's benchmark pairs two suites run at the same model and workers:

- a **convergence** suite: every method at 3+ seeds on loopback, evaluated every epoch, at a budget
  where exact has converged (its best-validation epoch at most ``CONVERGED`` x the budget);
- a **speed** suite: every method at each emulated bandwidth (labels ``<method>@<bw>``), with
  rounds and exact's A/A twin (the timing protocol of section 11).

For a synchronous method, time to target at a bandwidth = epochs to target (convergence runs, one
count per seed) x per-epoch time at that bandwidth (speed runs, a mean over whole periods, one per
round), so its **speedup to accuracy** over exact = (exact's mean epochs / the method's) x the
mean over pairs (a pair: one round of the speed runs' seed) of t_exact / t_method; the 95%
interval bootstraps seeds (both methods' epochs at the same resampled seeds: a seed draws the
split) and pairs, its percentiles widened for few of either (paired.py ``tails``). Each cell is
judged against exact's A/A twin at its bandwidth (section 11): no verdict where that point is not
clean, else "faster" / "slower" where the interval clears the A/A interval. A method that misses
the target at any seed is "not reached". The target is q = ``Q`` x exact's mean best validation accuracy;
where exact itself misses it at some seed (that seed's best validation accuracy more than 1 - q
below the seeds' mean), the graph is read at the first of ``FALLBACK`` that exact reaches at
every seed, and its pages say so (docs/methods.md section 12). Asynchronous methods (their
trajectory depends on timing) are not decomposed: their time to target is measured end to end,
in the graph's end-to-end suite (labels ``<method>@<bw>``, every epoch evaluated, on the training
clock), against exact's decomposed time; where that suite has no run of theirs at a bandwidth,
"end to end only", or "not reached on loopback" if their convergence runs missed the target.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from digest.runtime.netem import parse_rate

from experiments.analysis import periods
from . import schedule_check
from experiments.suites.suite import base_label, is_exact, network_of
from experiments.suites.load import Loaded
from experiments.suites.registry import register_methods
from experiments.analysis.convergence import (converged, convergence, epochs_to, target_of_conv, training_seconds)
from experiments.analysis.paired import (LEVEL, REPLICATES, SEED, Interval, clean, paired_ratio, tails, verdict)
from .points import points

CLOSE = 0.5         # points: "within this much of exact's accuracy" for the sentence
NOT_REACHED = "not reached"


def asynchronous(method: str) -> bool:
    """Timed end to end only (the registry's ``Method.asynchronous``; False if not registered)."""
    found = register_methods().METHODS.get(method)
    return found is not None and found.asynchronous


def round_times(speed: Loaded, warmup: int) -> dict:
    """{(label, bw): {round: per-epoch time (s)}} of a speed suite's seed-0 runs, each pair of
    runs timed over the window of the method's period (exact's is 1)."""
    out: dict = {}
    for r in list(speed.records) + list(speed.later):
        if r.seed != min(x.seed for x in speed.records):
            continue
        cfg = r.summary.get("config", {})
        out.setdefault((base_label(r.label), network_of(r.label)), {})[r.round] = \
            periods.epoch_time(r.metrics, cfg, warmup)
    return out


def _rng(*key: str) -> np.random.Generator:
    """The bootstrap's generator for one row: seeded by SEED and the row's key, so that a row's
    interval does not move when another row is added."""
    return np.random.default_rng([SEED, zlib.crc32("|".join(key).encode())])


def _boot(e_ref: dict, e_m: dict, t_ref: dict, t_m: dict, rng) -> tuple:
    """Point, lo, hi of (mean E_ref / mean E_m) x mean_r(t_ref / t_m): seeds and rounds
    resampled (each jointly for both methods), the tails set by the fewer of the two."""
    seeds = sorted(set(e_ref) & set(e_m))
    rounds = sorted(set(t_ref) & set(t_m))
    a, b = np.array([e_ref[s] for s in seeds], float), np.array([e_m[s] for s in seeds], float)
    ratio = np.array([t_ref[r] / t_m[r] for r in rounds])
    point = a.mean() / b.mean() * float(np.mean(ratio))
    si = rng.integers(len(seeds), size=(REPLICATES, len(seeds)))
    ri = rng.integers(len(rounds), size=(REPLICATES, len(rounds)))
    draws = a[si].mean(axis=1) / b[si].mean(axis=1) * np.mean(ratio[ri], axis=1)
    lo, hi = np.percentile(draws, tails(max(2, min(len(seeds), len(rounds)))))
    return float(point), float(lo), float(hi)


def _boot_e2e(e_ref: dict, t_ref: dict, measured: dict, rng) -> tuple:
    """Point, lo, hi of exact's decomposed time to target (mean E_ref x mean over rounds of
    t_ref) over a method's time measured end to end (mean over its seeds): the seeds both have
    resampled jointly (a seed draws the split), exact's rounds resampled, the tails set by the
    fewer of the two."""
    seeds = sorted(set(e_ref) & set(measured))
    a = np.array([e_ref[s] for s in seeds], float)
    m = np.array([measured[s] for s in seeds], float)
    t = np.array([t_ref[r] for r in sorted(t_ref)])
    point = a.mean() * float(np.mean(t)) / m.mean()
    si = rng.integers(len(seeds), size=(REPLICATES, len(seeds)))
    ri = rng.integers(len(t), size=(REPLICATES, len(t)))
    draws = a[si].mean(axis=1) * np.mean(t[ri], axis=1) / m[si].mean(axis=1)
    lo, hi = np.percentile(draws, tails(max(2, min(len(seeds), len(t)))))
    return float(point), float(lo), float(hi)


def end_to_end(conv: dict, e2e: Loaded) -> dict:
    """{(label, bw): {seed: (seconds, reached)}} of a graph's end-to-end runs at the convergence
    runs' target, on the training clock: the sum of per-epoch times up to the first evaluation at
    the target, or, where the run never got there, of all its epochs (a lower bound)."""
    target, out = target_of_conv(conv), {}
    for r in e2e.records:
        n = epochs_to(r.metrics, target)
        out.setdefault((base_label(r.label), network_of(r.label)), {})[r.seed] = \
            (training_seconds(r.metrics, n), n is not None)
    return out


def speedups(conv: dict, times: dict, bandwidths: list, measured: dict | None = None) -> pd.DataFrame:
    """One row per (label, bandwidth): speedup to accuracy over exact with its interval, its
    pairs (rounds of the speed runs; an asynchronous method's: its seeds measured end to end) and
    the verdict it supports at its point (paired.verdict against the A/A interval), or why there
    is none (an asynchronous method's from ``measured``, ``end_to_end``'s times); the per-epoch
    speedup, the ceiling (exact over partition-based per epoch) and the per-epoch speedup as a
    fraction of it; the A/A check of the point (``clean``, ``aa``, ``aa_lo``, ``aa_hi``,
    ``aa_pairs``). Exact's own row is the reference: no verdict."""
    ref, rows = conv["exact"], []
    for label, c in conv.items():
        for bw in bandwidths:
            rng = _rng(label, bw)
            row = {"method": label, "bandwidth": bw, "speedup": np.nan, "lo": np.nan,
                   "hi": np.nan, "note": "", "pairs": 0, "verdict": ""}
            t_ref, t_m = times.get(("exact", bw), {}), times.get((label, bw), {})
            aa = paired_ratio([([t_ref[r]], [v]) for r, v in times.get(("exact-aa", bw), {}).items()
                               if r in t_ref])
            part = paired_ratio([([t_ref[r]], [v]) for r, v in times.get(("partition", bw), {}).items()
                                 if r in t_ref])
            per = paired_ratio([([t_ref[r]], [v]) for r, v in t_m.items() if r in t_ref])
            row.update(per_epoch=per.mean if per else np.nan,
                       ceiling=part.mean if part else np.nan, clean=clean(aa),
                       aa=aa.mean if aa else np.nan, aa_lo=aa.lo if aa else np.nan,
                       aa_hi=aa.hi if aa else np.nan, aa_pairs=aa.pairs if aa else 0)
            row["of_ceiling"] = row["per_epoch"] / row["ceiling"]
            if any(v is None for v in ref.epochs.values()):  # no reference time to divide
                row["note"] = f"exact {NOT_REACHED}"
            elif asynchronous(c.method):
                got = {k: v for k, v in (measured or {}).get((label, bw), {}).items()
                       if k in ref.epochs}
                missed = sum(v is None for v in c.epochs.values())
                if (not got or not t_ref) and missed:  # no run behind the link; loopback's says
                    row["note"] = (f"{NOT_REACHED} on loopback at {missed} of {len(c.epochs)} "
                                   "seeds (not run end to end)")
                elif not got or not t_ref:
                    row["note"] = "end to end only (asynchronous)"
                else:
                    secs = {k: v for k, (v, _) in got.items()}
                    missed = sum(not ok for _, ok in got.values())
                    point, lo, hi = _boot_e2e(ref.epochs, t_ref, secs, rng)
                    if missed:  # a missed seed's whole run is a lower bound on its time
                        row["note"] = (f"< {point:.2f}x: {NOT_REACHED} at {missed} of "
                                       f"{len(got)} seeds (end to end)")
                    else:
                        row["speedup"], row["lo"], row["hi"] = point, lo, hi
                        row["note"], row["pairs"] = "end to end", len(got)
            elif any(v is None for v in c.epochs.values()):
                row["note"] = NOT_REACHED
            elif not t_m or not t_ref:
                row["note"] = "not timed at this bandwidth"
            else:
                row["speedup"], row["lo"], row["hi"] = _boot(ref.epochs, c.epochs, t_ref, t_m, rng)
                row["pairs"] = per.pairs
            if label == "exact":
                row["verdict"] = "reference"
            elif not np.isnan(row["speedup"]):
                row["verdict"] = verdict(Interval(row["speedup"], row["lo"], row["hi"],
                                                  row["pairs"]), aa)
            rows.append(row)
    return pd.DataFrame(rows)


def accuracy(conv: dict) -> pd.DataFrame:
    """Per label: test accuracy (mean, std over seeds), its difference from exact's (points) with
    a 95% interval (seeds resampled jointly), epochs to target (mean; reached k/n), MiB per epoch;
    the target's fraction q and the best validation accuracy by seed."""
    ref, rows = conv["exact"], []
    for label, c in conv.items():
        rng = _rng(label)
        seeds = sorted(set(c.test) & set(ref.test))
        d = np.array([c.test[s] - ref.test[s] for s in seeds]) * 100
        draws = d[rng.integers(len(d), size=(REPLICATES, len(d)))].mean(axis=1)
        tail = (1 - LEVEL) / 2 * 100
        reached = [e for e in c.epochs.values() if e is not None]
        rows.append({"method": label, "seeds": len(c.seeds),
                     "test_mean": 100 * np.mean(list(c.test.values())),
                     "test_std": 100 * np.std(list(c.test.values()), ddof=1) if len(c.test) > 1
                     else np.nan,
                     "delta": float(d.mean()), "delta_lo": float(np.percentile(draws, tail)),
                     "delta_hi": float(np.percentile(draws, 100 - tail)),
                     "epochs": float(np.mean(reached)) if len(reached) == len(c.epochs) else np.nan,
                     "reached": f"{len(reached)}/{len(c.epochs)}", "mib": c.mib,
                     "converged": converged(c) if is_exact(label) else None, "q": c.q,
                     "predicted": c.predicted,
                     "epochs_by_seed": [c.epochs[s] for s in sorted(c.epochs)],
                     "best_val": [c.best_val[s] for s in sorted(c.best_val)]})
    return pd.DataFrame(rows)


def _close(acc: pd.DataFrame, speed: pd.DataFrame, bw: str) -> pd.DataFrame:
    """The speed rows at ``bw`` of the methods within CLOSE points of exact (exact left out)."""
    ok = set(acc[acc.delta >= -CLOSE].method) - {"exact"}
    return speed[(speed.bandwidth == bw) & speed.method.isin(ok) & speed.speedup.notna()]


def fastest(acc: pd.DataFrame, speed: pd.DataFrame, bw: str) -> str | None:
    """The fastest method to the target at ``bw`` among those within CLOSE points of exact."""
    at = _close(acc, speed, bw)
    return None if at.empty else str(at.loc[at.speedup.idxmax(), "method"])


def clean_at(speed: pd.DataFrame, bw: str) -> bool:
    """Whether ``bw`` is a clean point (its A/A interval inside AA_BAND, on exact's row)."""
    ref = speed[(speed.method == "exact") & (speed.bandwidth == bw)]
    return bool(len(ref)) and bool(ref.clean.iloc[0])


def winner(acc: pd.DataFrame, speed: pd.DataFrame, bw: str) -> str | None:
    """The fastest method to the target at ``bw`` among those within CLOSE points of exact whose
    interval says "faster" (it clears the A/A interval); None at a point that is not clean, or
    where none does: no winner is named there."""
    at = _close(acc, speed, bw)
    at = at[at.verdict == "faster"]
    if at.empty or not clean_at(speed, bw):
        return None
    return str(at.loc[at.speedup.idxmax(), "method"])


def rivals(acc: pd.DataFrame, speed: pd.DataFrame, bw: str, best: str) -> pd.DataFrame:
    """The other close methods at ``bw`` whose interval reaches the fastest one's lower end, fastest
    first: the intervals do not rank them below it, so naming one winner would overstate it."""
    at = _close(acc, speed, bw)
    lo = float(at[at.method == best].lo.iloc[0])
    return at[(at.method != best) & (at.hi >= lo)].sort_values("speedup", ascending=False)


def decomposition_error(conv: dict, times: dict, e2e: Loaded) -> pd.DataFrame:
    """The decomposition checked against end-to-end runs (emulated, evaluated every epoch, labels
    ``<method>@<bw>``): per run, the measured time to target on the training clock against
    (its seed's epochs to target from the convergence runs) x (the mean over rounds of the speed
    suite's per-epoch time at that bandwidth), and the relative error."""
    target, rows = target_of_conv(conv), []
    for r in e2e.records:
        label, bw = base_label(r.label), network_of(r.label)
        c, t = conv.get(label), times.get((label, bw))
        if c is None or asynchronous(c.method) or not t or c.epochs.get(r.seed) is None:
            continue
        n = epochs_to(r.metrics, target)
        if n is None:
            continue
        measured = training_seconds(r.metrics, n)
        predicted = c.epochs[r.seed] * float(np.mean(list(t.values())))
        rows.append({"method": label, "bandwidth": bw, "seed": r.seed, "epochs": n,
                     "epochs_converge": c.epochs[r.seed], "measured_s": measured,
                     "predicted_s": predicted, "error_pct": 100 * (predicted / measured - 1)})
    return pd.DataFrame(rows)


@dataclass
class GraphVerdict:
    """One graph's verdict: accuracy and convergence per method (``accuracy``), speedups to
    accuracy at each bandwidth (``speedups``), the bandwidths fastest first, and the decomposition
    checked against end-to-end runs (None where the graph has none)."""
    acc: pd.DataFrame
    speed: pd.DataFrame
    bandwidths: list
    error: pd.DataFrame | None = None
    points: pd.DataFrame | None = None  # what decides each point (``points``)
    check: pd.DataFrame | None = None   # the cells against runs to the target (schedule_check)


def of_graph(converge: Loaded, speed: Loaded, e2e: Loaded | None = None,
             to_target: Loaded | None = None) -> GraphVerdict:
    """A graph's verdict from its convergence runs, its speed runs and, where there are some, its
    end-to-end emulated runs and its runs of every synchronous method up to the target on its
    own schedule (``to_target``; each restricted to the graph)."""
    conv = convergence(converge)
    times = round_times(speed, speed.warmup)
    bws = sorted({network_of(r.label) for r in speed.records if network_of(r.label)},
                 key=lambda b: -parse_rate(b)[0])
    err = decomposition_error(conv, times, e2e) if e2e is not None else None
    measured = end_to_end(conv, e2e) if e2e is not None else None
    sp = speedups(conv, times, bws, measured)
    checked = (schedule_check.check(to_target, target_of_conv(conv), sp)
               if to_target is not None and to_target.records else None)
    return GraphVerdict(accuracy(conv), sp, bws, err, points(speed, bws), checked)
