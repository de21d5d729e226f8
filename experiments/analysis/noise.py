"""The A/A noise floor across the committed speed suites (docs/methods.md section 11): every
point's A/A median and interval, as its suite's timing.csv has them on exact's reference row, and
whether the point passes the check (median within ``AA_BAND``, interval containing 1). A point
that fails is noisy: its speedups get no verdict on their page."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..suites.layout import committed_suites, folders
from .paired import AA_BAND, Interval, noisy

COLUMNS = ["suite", "dataset", "workers", "network", "aa", "aa_lo", "aa_hi", "median_in_band",
           "passes"]


def points(root: Path = Path(".")) -> pd.DataFrame:
    """One row per A/A point of every committed suite with a timing.csv, in suite order.

    Shapes: ``COLUMNS``; ``aa_lo``/``aa_hi`` NaN where the point has one pair (no interval)."""
    rows = []
    for name in committed_suites(root):
        path = Path(root) / folders(name)[0] / "timing.csv"
        if not path.exists():
            continue
        table = pd.read_csv(path)
        ref = table[(table["verdict"] == "reference") & table["aa"].notna()]
        for _, r in ref.iterrows():
            method = str(r["method"])
            floor = Interval(r["aa"], r["aa_lo"], r["aa_hi"], 0)  # noisy() reads no pair count
            in_band = bool(AA_BAND[0] <= r["aa"] <= AA_BAND[1])
            rows.append({"suite": name, "dataset": r["dataset"], "workers": int(r["workers"]),
                         "network": method.partition("@")[2] or "loopback", "aa": r["aa"],
                         "aa_lo": r["aa_lo"], "aa_hi": r["aa_hi"], "median_in_band": in_band,
                         "passes": not noisy(floor)})
    return pd.DataFrame(rows, columns=COLUMNS)
