"""How loaded the machine was during each run of a suite, from load-average samples taken beside
it: ``python -m experiments.runner`` samples while it runs (``sampling``: every 20 s into the
suite's load file, ``unix_time,load1,load5,load15`` lines, ``/proc/loadavg`` as it reads), and
``python -m experiments.runner --loads`` prints, per run, the mean and largest 1-minute load average
sampled inside its window (``per_run``; run.json says when it started and how many seconds it
took; "-" where no sample falls in it). RUNLOG.md shows the same per run. On the reference machine
(2 cores) 4 workers alone give a load of about 4; more means something else competed for the
cores, and that run's measured times are slower than a quiet machine's (its CPU seconds, hence the
modeled columns, much less so).
"""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pandas as pd


EVERY = 20  # seconds between two samples


@contextmanager
def sampling(path: Path, every: float = EVERY):
    """While the block runs, append ``unix_time,load1,load5,load15`` to ``path`` every ``every``
    seconds (the first at once), as ``/proc/loadavg`` gives them: what the runner records beside a
    suite's runs."""
    stop = threading.Event()

    def sample():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        while True:
            with open(path, "a") as f:
                f.write(f"{int(time.time())}," + ",".join(f"{x:.2f}" for x in os.getloadavg()) + "\n")
            if stop.wait(every):
                return

    thread = threading.Thread(target=sample, name="loadavg", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join()


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
