"""What ran for a suite, read from its committed run files (RUNLOG.md, which
experiments/render/runlog.py writes from this and ``python -m experiments.pages`` commits;
``./run_all.sh --check SUITE`` fails when it differs).

For each run folder under the suite's runs/ (run.json, summary.json): the git commit of the code
that ran it, its start (run.json) and end (start + run.json's wall seconds), its training time
(summary.json), the 1-minute load average sampled beside it (the suite's loadavg.csv:
results/<suite>/loadavg.csv, read with experiments/running/loadavg.py), the machine, how many
workers shared its cores, and the versions. Runs are grouped into periods of work (consecutive runs
at one commit, no gap over an hour), and what the files show as irregular is listed: runs started
after runs their plan puts after them (a re-run, or a later part run with --seeds), several commits,
a summary that differs from its run's plan (flags, command), runs of other flags than the suite's
now, runs drawn on a synthetic graph their spec no longer gives (a preset changed since), specs
renamed since a run (run.json's ``relabelled``), a suite renamed since (``renamed``: one line for
its runs), failed, missing or extra folders. A run folder is read where it lies: the --out path its
run.json's argv and summary.json's command record is provenance (where it was written; a suite's
folder moved since, with its runs, still names the old place) and is not compared with its place
now. Same files, same bytes: nothing here reads the clock,
the environment or an absolute path (run.json's start times are read as UTC, the reference machine's
clock, whatever the time zone of the machine that checks).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from ..running.loadavg import samples as read_samples
from ..suites.load import Loaded, graph_changed, load
from ..suites.suite import Suite, expand

PERIOD_GAP = timedelta(hours=1)  # a longer pause between two runs starts a new period of work


@dataclass
class Entry:
    path: str       # "<dataset folder>/<run>", relative to the runs folder
    dataset: str
    order: int      # position in the suite's runs; len(runs) for a folder the suite does not name
    info: dict      # run.json
    summary: dict   # summary.json, {} if absent or unreadable
    start: datetime | None
    seconds: float | None

    @property
    def name(self) -> str:
        return self.path.split("/", 1)[1]

    @property
    def commit(self) -> str:
        return str(self.summary.get("git_commit") or "unknown")

    @property
    def end(self) -> datetime | None:
        if self.start is None or self.seconds is None:
            return None
        return self.start + timedelta(seconds=round(self.seconds))


def _json(path: Path) -> dict:
    try:
        out = json.loads(path.read_text())
        return out if isinstance(out, dict) else {}
    except (OSError, ValueError):
        return {}


def _start(info: dict) -> datetime | None:
    try:
        return datetime.fromisoformat(str(info["started"]))
    except (KeyError, ValueError):
        return None


@dataclass
class RunLog:
    """What RUNLOG.md reports of a suite: its run folders, the runner's plan, its complete runs
    and the load samples (None without a samples file)."""
    suite: Suite
    runs: Path
    samples: Path | None
    items: list          # of Entry, in the suite's order
    plan: dict
    loaded: Loaded
    load: pd.DataFrame | None


def read(suite: Suite, runs: Path, samples: Path | None) -> RunLog:
    """A suite's run folders under ``runs`` and the load samples file, if there is one."""
    runs = Path(runs)
    load_df = read_samples(samples) if samples is not None and Path(samples).exists() else None
    return RunLog(suite, runs, samples, entries(runs, suite), read_plan(runs, suite),
                  load(runs, suite), load_df)


def by_commit(items: list[Entry]) -> dict:
    """{git commit: its runs by start time}, commits in the order their first run started."""
    out: dict = {}
    for e in sorted((e for e in items if e.start), key=lambda e: (e.start, e.path)):
        out.setdefault(e.commit, []).append(e)
    return out


def read_plan(runs: Path, suite: Suite) -> dict:
    """The runner's plan_<suite>.json under ``runs`` ({} when there is none)."""
    return _json(Path(runs) / f"plan_{suite.name}.json")


def when(t: datetime | None) -> str:
    """A start or end time as RUNLOG.md writes it ('-' when unknown)."""
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S")


def load_in(load: pd.DataFrame | None, start: datetime | None, end: datetime | None) -> pd.Series:
    """The 1-minute load averages sampled from start to end (UTC); empty without samples."""
    if load is None or start is None or end is None:
        return pd.Series(dtype=float)
    t0, t1 = (x.replace(tzinfo=timezone.utc).timestamp() for x in (start, end))
    return load.load1[(load.t >= t0) & (load.t <= t1)]


def entries(runs: Path, suite: Suite) -> list[Entry]:
    """Every run folder with a run.json under ``runs``, in the suite's order (extra ones last)."""
    order = {str(r.directory(".")): i for i, r in enumerate(expand(suite))}
    out = []
    for p in sorted(Path(runs).glob("*/*/run.json")):
        info = _json(p)
        rel = f"{p.parent.parent.name}/{p.parent.name}"
        seconds = info.get("seconds")
        out.append(Entry(rel, str(info.get("dataset", p.parent.parent.name)), order.get(rel, len(order)),
                         info, _json(p.parent / "summary.json"), _start(info),
                         float(seconds) if isinstance(seconds, (int, float)) else None))
    return sorted(out, key=lambda e: (e.order, e.path))


def periods(items: list[Entry]) -> list[list[Entry]]:
    """Runs by start time, split where the commit changes or no run started for PERIOD_GAP."""
    timed = sorted((e for e in items if e.start is not None), key=lambda e: (e.start, e.path))
    out: list[list[Entry]] = []
    for e in timed:
        last = out[-1][-1] if out else None
        if last is None or e.commit != last.commit or e.start - (last.end or last.start) > PERIOD_GAP:
            out.append([e])
        else:
            out[-1].append(e)
    return out


def plan_notes(suite: Suite, plan: dict) -> list[str]:
    """What the last run of the suite was restricted to (--seeds, --networks, --labels, --rounds)
    and what its plan skipped."""
    name, out = f"plan_{suite.name}.json", []
    for key, what in (("seeds", "seeds"), ("networks", "the bandwidths"), ("labels", "the labels"),
                      ("rounds", "the rounds")):
        if plan.get(key) is not None:
            out.append(f"{name}: the last run of the suite was restricted to {what} "
                       + ", ".join(map(str, plan[key])) + f" (--{key})")
    return out + [f"{name}: skipped {note}" for note in plan.get("skipped") or []]


def irregular(items: list[Entry], suite: Suite, plan: dict) -> list[str]:
    """One line per thing the run files show as irregular (see the module doc)."""
    out = plan_notes(suite, plan)
    by_run = {str(r.directory(".")): r for r in expand(suite)}
    planned = set(plan["runs"]) if "runs" in plan else set(by_run)
    present = {e.path for e in items}
    renamed = Counter(tuple(r.items()) for e in items if (r := e.info.get("renamed")))
    out += [f"{n} run folders ran as suite {r['from']} (results/{r['from']}/runs: the --out their argv "
            f"records); renamed since ({r.get('why')})" for r, n in ((dict(k), n) for k, n in renamed.items())]
    for e in items:
        run, status = by_run.get(e.path), e.info.get("status", "?")
        if run is None:
            out.append(f"{e.path}: a run folder the suite does not name (not in its tables)")
        elif e.info.get("hash") != run.hash:
            out.append(f"{e.path}: ran with other flags than the suite names now (config hash "
                       f"{str(e.info.get('hash'))[:8]}, the suite's {run.hash[:8]}): not in the tables")
        elif changed := graph_changed(run, e.summary):
            out.append(f"{e.path}: drawn at generator options its spec no longer gives ({changed}): "
                       "not in the tables")
        elif e.path not in planned:
            out.append(f"{e.path}: not in plan_{suite.name}.json (its dataset or method was skipped)")
        if (relabel := e.info.get("relabelled")) and "from" in relabel:  # a spec renamed
            out.append(f"{e.path}: ran as --dataset {relabel.get('from')}; renamed since to the "
                       f"spec that gives the graph it ran on ({relabel.get('why')})")
        elif relabel:  # a flag whose default changed: the run's flags now name what it ran
            named = ", ".join(f"{k}={v}" for k, v in (relabel.get("flags") or {}).items())
            out.append(f"{e.path}: its flags now name {named}, as it ran ({relabel.get('why')})")
        if status != "complete" or e.summary.get("status") != "complete":
            out.append(f"{e.path}: run.json status {status}, summary.json status "
                       f"{e.summary.get('status', 'absent')}: not in the tables")
        flags, config = e.info.get("flags") or {}, e.summary.get("config") or {}
        differ = sorted(k for k, v in flags.items() if config.get(k) != v)
        if e.summary and differ:
            out.append(f"{e.path}: summary.json's config differs from run.json's flags in "
                       + ", ".join(f"{k} ({config.get(k)!r}, planned {flags[k]!r})" for k in differ))
        argv = " ".join(map(str, e.info.get("argv") or []))
        if e.summary.get("command") and argv and e.summary["command"] != argv:
            out.append(f"{e.path}: summary.json's command differs from run.json's argv")
        if e.commit == "unknown" or e.commit.endswith("-dirty"):
            out.append(f"{e.path}: code commit {e.commit} (uncommitted changes, or no git)")
    late: dict = {}  # (dataset folder, commit): runs started after runs the suite puts after them
    for e in items:
        if e.start and any(f.dataset == e.dataset and f.commit == e.commit and f.order > e.order
                           and f.start and f.start < e.start for f in items):
            late.setdefault((e.path.split("/")[0], e.commit[:7]), []).append(e)
    for (folder, commit), runs_late in late.items():
        out.append(f"{folder} at {commit}: " + ", ".join(f"{e.name} ({when(e.start)})" for e in runs_late)
                   + " started after runs of the same dataset and commit that the suite runs after "
                   "them: re-runs, or parts of the suite run later (--seeds, or runs added to it)")
    out += [f"{p}: planned, no run folder" for p in by_run if p in planned and p not in present]
    return out
