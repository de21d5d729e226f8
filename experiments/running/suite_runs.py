"""A suite run, resumably (``python -m experiments.runner`` runs it).

Each run is a subprocess ``python -m digest train <flags> --out <dir> --no-progress``
(``launch.launch``), its stdout/stderr in ``<dir>/log.txt``. A run whose ``summary.json`` says
complete and whose ``run.json`` holds the same config hash is skipped, so an interrupted suite
resumes and loses nothing finished; any other existing directory is cleared and rerun. A failed
run is reported in one line and the suite goes on. Runs start interleaved
(experiments/suites/schedule.py); run.json records each run's round, position and start time.
Methods not registered and datasets not available are skipped with the reason printed, and
written to the plan (plan_<suite>.json).
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

from tqdm import tqdm

from digest.training.checkpoint import CONFIG
from digest.training.metrics import write_json
from digest.training.run import complete_summary

from ..suites.load import graph_changed
from ..suites.schedule import interleave
from ..suites.suite import Run, Suite, base_label, expand, network_of
from ..suites.registry import registered_methods
from .launch import launch


def unavailable_datasets(names) -> dict[str, str]:
    """{dataset: why it is skipped} for datasets the data root (or shared mirror) lacks."""
    from digest.data import list_datasets
    known = {r["name"].lower(): r for r in list_datasets()}
    why = {}
    for name in names:
        r = known.get(name.split(":")[0].lower())
        if r is None:
            why[name] = "not a registered dataset (see `python -m digest datasets`)"
        elif not r["available"]:
            why[name] = f"files missing in {r['where']} (fetch from {r['url']})"
    return why


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def is_complete(run: Run, directory: Path, summary: dict | None) -> bool:
    """A complete run of this config hash on the graph its spec gives now (``summary``: the
    directory's summary.json)."""
    record = read_json(directory / "run.json")
    return bool(summary and summary.get("status") == "complete" and record
                and record.get("hash") == run.hash and not graph_changed(run, summary))


def log_tail(directory: Path, lines: int = 1) -> str:
    try:
        text = [x for x in (directory / "log.txt").read_text().splitlines() if x.strip()]
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


def resumable(run: Run, directory: Path) -> dict | None:
    """The run.json of an interrupted run of this config hash that left a checkpoint (a suite
    with ``checkpoint_every``), else None."""
    record = read_json(directory / "run.json")
    if (record and record.get("hash") == run.hash and record.get("status") != "complete"
            and (directory / "checkpoint" / CONFIG).is_file()):
        return record
    return None


def execute(run: Run, directory: Path, launcher=launch) -> bool:
    """Clear the directory (or, where an interrupted run of this hash left a checkpoint, continue
    it), run, record the outcome in run.json; True when complete."""
    earlier = resumable(run, directory)
    if earlier is not None:
        run = dataclasses.replace(run, resume=True)
        record = {**earlier, "status": "running",
                  "resumed": [*earlier.get("resumed", []), time.strftime("%Y-%m-%dT%H:%M:%S")]}
    else:
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        record = {"label": run.label, "dataset": run.dataset, "method": run.spec.method,
                  "workers": run.workers, "seed": run.seed, "round": run.round,
                  "position": run.position, "flags": run.flags,
                  "hash": run.hash,
                  "argv": ["python", *run.argv(directory)], "status": "running",
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_json(directory / "run.json", record)
    t0, before = time.perf_counter(), record.get("seconds", 0.0)  # sittings before this one
    try:
        rc = launcher(run, directory)
    except KeyboardInterrupt:
        write_json(directory / "run.json", {**record, "status": "interrupted",
                                            "seconds": before + time.perf_counter() - t0})
        raise
    ok = rc == 0 and complete_summary(directory) is not None
    write_json(directory / "run.json", {**record, "status": "complete" if ok else "failed",
                                        "returncode": rc,
                                        "seconds": before + time.perf_counter() - t0})
    return ok


def plan(suite: Suite, methods: set[str]) -> tuple[list[Run], list[str]]:
    """The suite's runs minus those of unregistered methods / unavailable datasets, in the order
    they start (``schedule.interleave``), and why."""
    notes = [f"{spec.label}: method {spec.method!r} is not registered (`python -m digest methods` "
             f"lists {', '.join(sorted(methods))})" for spec in suite.methods if spec.method not in methods]
    missing = unavailable_datasets(suite.datasets)
    notes += [f"dataset {name}: {why}" for name, why in missing.items()]
    return interleave([r for r in expand(suite) if r.spec.method in methods
                       and r.dataset not in missing]), notes


def plan_path(root: Path, suite_name: str) -> Path:
    return Path(root) / f"plan_{suite_name}.json"


def run_suite(suite: Suite, root: Path, methods: set[str] | None = None, launcher=launch,
              seeds: set[int] | None = None, networks: set[str] | None = None,
              labels: set[str] | None = None, rounds: set[int] | None = None) -> dict:
    """Run the suite's runs not yet complete; with ``seeds`` (``networks``, ``labels``,
    ``rounds``), only those seeds' runs (those at these emulated bandwidths, of these method
    labels, of these timing rounds): a long suite can then be run in parts, and the tables read
    whatever runs are complete."""
    runs, notes = plan(suite, registered_methods() if methods is None else methods)
    for note in notes:
        print(f"note: skipping {note}")
    # the plan names every run of the suite, so that the tables of a sitting restricted to some
    # seeds still read the runs the other sittings completed
    write_json(plan_path(root, suite.name), {"suite": suite.name, "skipped": notes,
                                             "seeds": None if seeds is None else sorted(seeds),
                                             "networks": None if networks is None
                                             else sorted(networks),
                                             "labels": None if labels is None else sorted(labels),
                                             "rounds": None if rounds is None else sorted(rounds),
                                             "runs": [str(r.directory(".")) for r in runs]})
    if seeds is not None:
        runs = [r for r in runs if r.seed in seeds]
    if networks is not None:
        runs = [r for r in runs if network_of(r.label) in networks]
    if labels is not None:
        runs = [r for r in runs if base_label(r.label) in labels]
    if rounds is not None:
        runs = [r for r in runs if r.round in rounds]
    counts = {"ran": 0, "skipped": 0, "failed": []}
    t0 = time.perf_counter()
    with tqdm(total=len(runs), desc=f"suite {suite.name}", unit="run", dynamic_ncols=True) as bar:
        for run in runs:
            directory = run.directory(root)
            bar.set_postfix_str(f"{run.dataset} {run.name}")
            summary = read_json(directory / "summary.json")
            changed = graph_changed(run, summary or {})
            if changed:
                tqdm.write(f"rerun {run.dataset} {run.name}: its graph changed since ({changed})")
            if is_complete(run, directory, summary):
                counts["skipped"] += 1
            elif execute(run, directory, launcher):
                counts["ran"] += 1
            else:
                counts["failed"].append(run.name)
                tqdm.write(f"FAILED {run.dataset} {run.name}: {log_tail(directory)} "
                           f"(log: {directory / 'log.txt'})")
            bar.update()
    print(f"suite {suite.name}: {len(runs)} runs: {counts['ran']} ran, {counts['skipped']} already "
          f"complete (skipped), {len(counts['failed'])} failed, in {time.perf_counter() - t0:.0f} s"
          f" -> {root}")
    return counts
