"""What the corrected timing rule changed (docs/methods.md section 11): each paired per-epoch
speedup of a suite under the rule it was first published with, beside the rule of today, from the
same run files.

The former rule: a run's time = its median timed epoch (all epochs after the warm-up); the
speedup = the median over pairs of median(exact) / median(method); its interval a bootstrap over
pairs and, within each, over epochs; "no measurable difference" where the interval overlapped the
A/A interval, else faster or slower. It is kept here only to say, on each page, which verdicts and
ratios the correction moved; no table reads it otherwise.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..suites.suite import aa_label, exact_for, is_aa, is_exact
from ..suites.load import Loaded
from .paired import LEVEL, NO_DIFFERENCE, REPLICATES, SEED

MOVED = 0.05  # a ratio that moved by this fraction or more is listed
COLUMNS = ["dataset", "method", "workers", "former", "former_lo", "former_hi", "former_verdict",
           "speedup", "speedup_lo", "speedup_hi", "verdict", "change_pct"]


def _former_ratio(pairs: list) -> tuple:
    """(median, lo, hi) of median(a) / median(b) over pairs, epochs resampled inside each pair."""
    point = float(np.median([np.median(a) / np.median(b) for a, b in pairs]))
    rng = np.random.default_rng(SEED)
    draws = rng.integers(len(pairs), size=(REPLICATES, len(pairs)))
    values = np.empty(draws.shape)
    for p, (a, b) in enumerate(pairs):
        slots = draws == p
        n = int(slots.sum())
        ia, ib = rng.integers(len(a), size=(n, len(a))), rng.integers(len(b), size=(n, len(b)))
        values[slots] = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(np.median(values, axis=1), [tail, 100 - tail])
    return point, float(lo), float(hi)


def former(loaded: Loaded, runs: list) -> dict:
    """{(dataset, label, M): (median, lo, hi)} under the former rule, for every non-exact label."""
    warmup = loaded.warmup
    by = {(r.dataset, r.label, r.workers, r.seed, r.round): r for r in runs}
    pairs: dict = {}
    for (d, label, w, s, rnd), r in by.items():
        ref = by.get((d, exact_for(label), w, s, rnd))
        if not is_exact(label) and ref is not None:
            t = lambda x: x.metrics["epoch_time"].to_numpy(dtype=float)[warmup:]  # noqa: E731
            pairs.setdefault((d, label, w), []).append((t(ref), t(r)))
    return {k: _former_ratio(v) for k, v in pairs.items() if all(len(a) and len(b) for a, b in v)}


def _former_verdict(iv: tuple, floor: tuple | None) -> str:
    _, lo, hi = iv
    flo, fhi = floor[1:] if floor else (1.0, 1.0)
    if lo <= fhi and flo <= hi:
        return NO_DIFFERENCE
    return "faster" if lo > fhi else "slower"


def table(loaded: Loaded, runs: list, timing: pd.DataFrame) -> pd.DataFrame:
    """timing_rule_change.csv: per non-exact row of timing.csv, the former ratio, interval and
    verdict beside today's, and the change of the ratio in percent."""
    old = former(loaded, runs)
    rows = []
    for r in timing.itertuples():
        key = (r.dataset, r.method, r.workers)
        if is_exact(r.method) or is_aa(r.method) or key not in old:
            continue
        floor = old.get((r.dataset, aa_label(exact_for(r.method)), r.workers))
        f = old[key]
        rows.append({"dataset": r.dataset, "method": r.method, "workers": r.workers,
                     "former": f[0], "former_lo": f[1], "former_hi": f[2],
                     "former_verdict": _former_verdict(f, floor), "speedup": r.speedup,
                     "speedup_lo": r.speedup_lo, "speedup_hi": r.speedup_hi,
                     "verdict": r.verdict, "change_pct": 100 * (r.speedup / f[0] - 1)})
    return pd.DataFrame(rows, columns=COLUMNS)


def notable(change: pd.DataFrame) -> pd.DataFrame:
    """The rows whose verdict changed or whose ratio moved by ``MOVED`` or more."""
    if change.empty:
        return change
    return change[(change.former_verdict != change.verdict)
                  | (change.change_pct.abs() >= 100 * MOVED)]
