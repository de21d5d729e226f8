"""Read complete runs (summary.json + metrics.csv + run.json) for the tables and the plots.

With a suite, exactly the suite's runs are read (those complete with the current config hash, on
the graph their spec draws now: a synthetic run drawn at other generator options, e.g. before a
preset was recalibrated, is missing, not averaged with the new ones), in the suite's order, and
the missing ones are listed; without one, every complete run under the root.

Rounds (the timing protocol, docs/methods.md section 11): ``records`` holds round 0's runs (one run
per seed: what every table but the timing protocol's reads), ``later`` those of rounds 1.. (read by
experiments/analysis/timing.py with ``records``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from digest.data.registry import parse_spec
from digest.data.synthetic import drawn_options

from .suite import WARMUP, Run, Suite, expand, labels


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
    round: int = 0           # the timing protocol's repetition (run.json; 0 when not recorded)
    started: str | None = None  # when the runner started it (run.json)
    hash: str | None = None     # the runner's configuration hash (run.json; a copied run keeps it)


@dataclass
class Loaded:
    records: list            # of RunRecord, in suite order
    datasets: list           # in order
    labels: list             # method labels, in order
    expected: int = 0        # runs the suite names (0 without a suite)
    missing: list = field(default_factory=list)  # "dataset label_wM_sS" not complete
    skipped: list = field(default_factory=list)  # why the runner skipped datasets / methods
    later: list = field(default_factory=list)    # RunRecords of rounds 1.., in suite order
    warmup: int = WARMUP     # the suite's warm-up epochs (docs/methods.md section 11)
    fit_epochs: tuple = ()   # the suite's epochs for the training-fit table (analysis/fit.py)
    budgets: tuple = ()      # the suite's epoch budgets (analysis/budget.py)

    @property
    def done(self) -> int:
        """Complete runs, every round's (``records`` holds round 0's alone)."""
        return len(self.records) + len(self.later)


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
                     directory=directory, summary=summary, metrics=metrics,
                     round=int(info.get("round") or 0), started=info.get("started"),
                     hash=info.get("hash"))


def graph_changed(run: Run, summary: dict) -> str:
    """What differs between the generator options a synthetic run recorded (summary.json's
    dataset.meta.options) and those its spec resolves to now, e.g. ``signal 0.1 -> 0.035``; ""
    when nothing does or the dataset is not synthetic. The config hash is of the flags, so a
    recalibrated preset (digest/data/presets.py) leaves the spec, and the hash, as they were: this
    is what makes such a run stale."""
    try:
        info, now = parse_spec(run.flags.get("dataset", "synthetic"))
    except ValueError:
        return ""
    recorded = ((summary.get("dataset") or {}).get("meta") or {}).get("options") or {}
    if info.kind != "synthetic" or not recorded:
        return ""
    recorded = drawn_options(recorded)  # with the defaults the generator does not record
    return ", ".join(f"{k} {recorded[k]} -> {v}" for k, v in sorted(now.items())
                     if k in recorded and recorded[k] != v)


def missing_parts(name: str) -> tuple[str, str, int | None]:
    """A missing run as ``load`` names it, split: its dataset, label and seed
    ("CS exact@1gbit_w4_s0_r1" -> ("CS", "exact@1gbit", 0))."""
    dataset, run = name.split(" ", 1) if " " in name else ("", name)
    label, rest = run.rsplit("_w", 1) if "_w" in run else (run, "")
    seed = re.search(r"_s(\d+)", "_" + rest)
    return dataset, label, int(seed.group(1)) if seed else None


def load(root: str | Path, suite: Suite | None = None) -> Loaded:
    """The complete runs under ``root``: exactly ``suite``'s (see the module doc), or, without a
    suite, every complete run there."""
    root = Path(root)
    if suite is not None:
        s = suite
        records, missing, runs = [], [], expand(s)
        plan = _json(root / f"plan_{s.name}.json") or {}
        if "runs" in plan:  # what the runner planned: runs of skipped datasets / methods left out
            planned = set(plan["runs"])
            runs = [r for r in runs if str(r.directory(".")) in planned]
        for run in runs:
            rec = read_record(run.directory(root), run.hash)
            changed = graph_changed(run, rec.summary) if rec is not None else ""
            if rec is None or changed:  # a run on a graph the spec no longer draws is not its run
                missing.append(f"{run.dataset} {run.name}"
                               + (f" (graph changed: {changed})" if changed else ""))
            else:
                records.append(rec)
        first = [r for r in records if not r.round]
        return Loaded(first, [d for d in s.datasets if any(r.dataset == d for r in first)],
                      [x for x in labels(s) if any(r.label == x for r in first)],
                      len(runs), missing, plan.get("skipped", []),
                      [r for r in records if r.round], s.warmup, s.fit_epochs, s.budgets)
    records = [r for r in (read_record(p.parent) for p in sorted(root.glob("**/summary.json"))) if r]
    records.sort(key=lambda r: (r.dataset, r.label, r.workers, r.seed, r.round))
    first = [r for r in records if not r.round]
    return Loaded(first, list(dict.fromkeys(r.dataset for r in first)),
                  sorted({r.label for r in first}, key=lambda x: (x != "exact", x)),
                  later=[r for r in records if r.round])
