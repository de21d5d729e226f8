"""The A/A noise floor across the committed speed suites (docs/methods.md section 11): every
point's A/A mean, interval and pairs, as its suite's timing.csv has them on the A/A row, and
whether the point is clean (its interval inside ``AA_BAND``). A point that is not clean gets no
verdict on its page."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.suites.layout import committed_suites, folders
from experiments.analysis.paired import AA_BAND, Interval, clean

COLUMNS = ["suite", "dataset", "workers", "network", "aa", "aa_lo", "aa_hi", "pairs", "clean"]


def points(root: Path = Path(".")) -> pd.DataFrame:
    """One row per A/A point of every committed suite with a timing.csv, in suite order.

    Shapes: ``COLUMNS``; ``aa_lo``/``aa_hi`` NaN where the point has one pair (no interval)."""
    rows = []
    for name in committed_suites(root):
        path = Path(root) / folders(name)[0] / "timing.csv"
        if not path.exists():
            continue
        table = pd.read_csv(path)
        for _, r in table[table["verdict"] == "A/A (noise floor)"].iterrows():
            floor = Interval(r["speedup"], r["speedup_lo"], r["speedup_hi"], int(r["pairs"]))
            rows.append({"suite": name, "dataset": r["dataset"], "workers": int(r["workers"]),
                         "network": str(r["method"]).partition("@")[2] or "loopback",
                         "aa": r["speedup"], "aa_lo": r["speedup_lo"], "aa_hi": r["speedup_hi"],
                         "pairs": int(r["pairs"]), "clean": clean(floor)})
    return pd.DataFrame(rows, columns=COLUMNS)
