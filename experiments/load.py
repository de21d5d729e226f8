"""Read complete runs (summary.json + metrics.csv + run.json) for the tables and the plots.

With a suite, exactly the suite's runs are read (those complete with the current config hash), in
the suite's order, and the missing ones are listed; without one, every complete run under the root.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .config import expand, labels, load_suite


@dataclass
class RunRecord:
    dataset: str
    label: str
    method: str
    workers: int
    seed: int
    directory: Path
    summary: dict
    metrics: pd.DataFrame = field(repr=False)


@dataclass
class Loaded:
    records: list            # of RunRecord, in suite order
    datasets: list           # in order
    labels: list             # method labels, in order
    expected: int = 0        # runs the suite names (0 without a suite)
    missing: list = field(default_factory=list)  # "dataset label_wM_sS" not complete
    skipped: list = field(default_factory=list)  # why the runner skipped datasets / methods


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_record(directory: Path, expect_hash: str | None = None) -> RunRecord | None:
    summary, info = _json(directory / "summary.json"), _json(directory / "run.json") or {}
    if not summary or summary.get("status") != "complete":
        return None
    if expect_hash is not None and info.get("hash") != expect_hash:
        return None
    try:
        metrics = pd.read_csv(directory / "metrics.csv")
    except (OSError, ValueError):
        return None
    cfg = summary.get("config", {})
    return RunRecord(dataset=info.get("dataset", cfg.get("dataset", "?")),
                     label=info.get("label", cfg.get("method", "?")),
                     method=info.get("method", cfg.get("method", "?")),
                     workers=int(info.get("workers", summary.get("world_size", cfg.get("workers", 1)))),
                     seed=int(info.get("seed", cfg.get("seed", 0))),
                     directory=directory, summary=summary, metrics=metrics)


def load(root: str | Path, suite: str | None = None) -> Loaded:
    root = Path(root)
    if suite is not None:
        s = load_suite(suite)
        records, missing, runs = [], [], expand(s)
        plan = _json(root / f"plan_{s.name}.json") or {}
        if "runs" in plan:  # what the runner planned: runs of skipped datasets / methods left out
            planned = set(plan["runs"])
            runs = [r for r in runs if str(r.directory(".")) in planned]
        for run in runs:
            rec = read_record(run.directory(root), run.hash)
            if rec is None:
                missing.append(f"{run.dataset} {run.name}")
            else:
                records.append(rec)
        return Loaded(records, [d for d in s.datasets if any(r.dataset == d for r in records)],
                      [x for x in labels(s) if any(r.label == x for r in records)],
                      len(runs), missing, plan.get("skipped", []))
    records = [r for r in (read_record(p.parent) for p in sorted(root.glob("**/summary.json"))) if r]
    records.sort(key=lambda r: (r.dataset, r.label, r.workers, r.seed))
    return Loaded(records, list(dict.fromkeys(r.dataset for r in records)),
                  sorted({r.label for r in records}, key=lambda x: (x != "exact", x)))
