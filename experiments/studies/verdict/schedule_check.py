"""The verdict's cells checked end to end (docs/methods.md section 12): each synchronous method
trained behind the link with its convergence run's flags (its own schedule, scaled to its epoch
budget) up to the target, at two or more seeds (suites ``bench_e2e_sync_*``). Its time to the
target is read from its own metrics.csv: the sum of its per-epoch training times up to the first
evaluation at or above the target (evaluation is outside that clock). The speedup end to end is
exact's mean time over the method's, the seeds both ran; beside it, the verdict's cell and their
relative difference. Pure analysis, no files."""
from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.suites.load import Loaded
from experiments.suites.suite import base_label, network_of
from experiments.analysis.convergence import epochs_to, training_seconds


def to_target(runs: Loaded, target: float) -> dict:
    """{(label, bandwidth): {seed: (epochs, seconds on the training clock) to ``target``, or
    None where the run never got there}}."""
    out: dict = {}
    for r in runs.records + runs.later:
        n = epochs_to(r.metrics, target)
        out.setdefault((base_label(r.label), network_of(r.label)), {})[r.seed] = (
            None if n is None else (n, training_seconds(r.metrics, n)))
    return out


def check(runs: Loaded, target: float, speed: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, bandwidth) run end to end: its seeds, epochs and seconds to the
    target (mean over seeds), the speedup end to end (exact's mean time over its own, over the
    seeds both reached), the verdict's speedup at that cell (``speed``: verdict.speedups) and
    ``error_pct`` = 100 x (verdict / end to end - 1); NaN where either is missing."""
    reached, rows = to_target(runs, target), []
    for (label, bw), by_seed in reached.items():
        ref = reached.get(("exact", bw), {})
        secs = {s: hit[1] for s, hit in by_seed.items() if hit is not None}
        both = sorted(s for s in secs if ref.get(s) is not None)
        e2e = (np.mean([ref[s][1] for s in both]) / np.mean([secs[s] for s in both])
               if both else np.nan)
        cell = speed[(speed.method == label) & (speed.bandwidth == bw)]
        verdict = 1.0 if label == "exact" else float(cell.speedup.iloc[0]) if len(cell) else np.nan
        rows.append({"method": label, "bandwidth": bw, "seeds": len(by_seed),
                     "reached": len(secs),
                     "epochs": ";".join("-" if by_seed[s] is None else str(by_seed[s][0])
                                        for s in sorted(by_seed)),
                     "seconds": float(np.mean(list(secs.values()))) if secs else np.nan,
                     "e2e_speedup": e2e, "verdict_speedup": verdict,
                     "error_pct": 100 * (verdict / e2e - 1) if both else np.nan})
    return pd.DataFrame(rows)
