"""How loaded the machine was during each run of a suite, from load-average samples taken beside it:

    python -m experiments.loadavg --runs results/runs --samples results/loadavg_repro.csv

The samples file holds ``unix_time,load1,load5,load15`` lines (``/proc/loadavg`` read every 20 s
while the suite ran, e.g. ``while :; do echo "$(date +%s),$(cut -d' ' -f1-3 /proc/loadavg |
tr ' ' ,)"; sleep 20; done``). Each run's ``run.json`` says when it started and how many seconds
it took; this prints, per run, the mean and largest 1-minute load average sampled inside that
window ("-" where no sample falls in it). On the reference machine (2 cores) 4 workers alone give
a load of about 4; more means something else competed for the cores, and that run's measured
times are slower than a quiet machine's (its CPU seconds, hence the modeled columns, much less so).
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

import pandas as pd


def samples(path: Path) -> pd.DataFrame:
    """The samples file as numbers; ValueError (one line) if a line is not 4 numbers."""
    load = pd.read_csv(path, names=["t", "load1", "load5", "load15"], dtype=str)
    numeric = load.apply(pd.to_numeric, errors="coerce")
    bad = numeric.isna().any(axis=1)
    if bad.any():
        line = int(bad.to_numpy().argmax()) + 1
        raise ValueError(f"{path}:{line}: expected unix_time,load1,load5,load15, got "
                         f"{','.join(str(v) for v in load.iloc[line - 1] if v == v)!r}")
    return numeric


def per_run(runs: Path, load: pd.DataFrame) -> pd.DataFrame:
    """One row per run folder with a run.json: dataset, label, workers, seed, seconds, load1 mean
    and max."""
    rows = []
    for path in sorted(runs.glob("*/*/run.json")):
        r = json.loads(path.read_text())
        start = datetime.fromisoformat(r["started"]).timestamp()
        inside = load[(load.t >= start) & (load.t <= start + r["seconds"])]
        rows.append({"dataset": r["dataset"], "label": r["label"], "workers": r["workers"],
                     "seed": r["seed"], "started": r["started"], "seconds": round(r["seconds"], 1),
                     "samples": len(inside),
                     "load1_mean": round(inside.load1.mean(), 2) if len(inside) else None,
                     "load1_max": inside.load1.max() if len(inside) else None})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.loadavg", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True, help="a suite's runs folder (results/runs)")
    p.add_argument("--samples", required=True, help="the load-average samples (CSV, see above)")
    args = p.parse_args(argv)
    try:
        table = per_run(Path(args.runs), samples(Path(args.samples)))
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(table.astype(object).fillna("-").to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
