"""tables.md's method-state tables (the numbers: experiments/analysis/method_state.py): each
method's own metrics columns and peak memory, one table a dataset."""
from __future__ import annotations

import pandas as pd

from .markdown import md_table


def section(df: pd.DataFrame) -> str:
    """tables.md's sub-tables of section 4, one per dataset."""
    out = []
    for dataset, part in df.groupby("dataset", sort=False):
        out.append(f"\n### {dataset}: method state (its own metrics.csv columns, mean over epochs "
                   "and seeds) and peak memory per worker\n\n")
        out.append(md_table(["method", "M", "seeds", "peak MiB", "state"],
                            [[r.method, r.workers, r.seeds,
                              "n/a" if r.peak_mem_mb != r.peak_mem_mb else f"{r.peak_mem_mb:.0f}",
                              r.state or "–"] for r in part.itertuples()]))
    return "".join(out)

