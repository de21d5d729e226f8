"""Run a suite, resumably: ``python -m experiments.runner --suite quick --out results/quick/runs``.

Each run is a subprocess ``python -m digest train <flags> --out <dir> --no-progress`` (the path a
user takes), its stdout/stderr in ``<dir>/log.txt``. A run whose ``summary.json`` says complete and
whose ``run.json`` holds the same config hash is skipped, so an interrupted suite resumes and loses
nothing finished; any other existing directory is cleared and rerun. A failed run is reported in
one line and the suite goes on. Runs start interleaved (experiments/suites/schedule.py: round by round,
point by point, the methods of a point in a seeded random order); run.json records each run's round, position and start
time. Methods not registered and datasets not available are skipped with
the reason printed. Exit status: 0, or 1 when some run failed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tqdm import tqdm

from digest.training.metrics import write_json

from .suites.suite import Run, expand, load_suite
from .suites.load import graph_changed
from .suites.schedule import interleave

REPO = Path(__file__).resolve().parents[1]


def registered_methods(python: str = sys.executable) -> set[str]:
    out = subprocess.run([python, "-m", "digest", "methods"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


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


def launch(run: Run, directory: Path, python: str = sys.executable) -> int:
    with open(directory / "log.txt", "w") as log:
        return subprocess.run([python, *run.argv(directory)], cwd=REPO, stdout=log,
                              stderr=subprocess.STDOUT).returncode


def log_tail(directory: Path, lines: int = 1) -> str:
    try:
        text = [x for x in (directory / "log.txt").read_text().splitlines() if x.strip()]
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


def execute(run: Run, directory: Path, launcher=launch) -> bool:
    """Clear the directory, run, record the outcome in run.json; True when complete."""
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
    t0 = time.perf_counter()
    try:
        rc = launcher(run, directory)
    except KeyboardInterrupt:
        write_json(directory / "run.json", {**record, "status": "interrupted"})
        raise
    ok = rc == 0 and is_complete_summary(directory)
    write_json(directory / "run.json", {**record, "status": "complete" if ok else "failed",
                                        "returncode": rc, "seconds": time.perf_counter() - t0})
    return ok


def cli_run(out: Path, dataset: str, method: str, workers: int, epochs: int, extra=()) -> dict:
    """``python -m digest train`` as a user runs it; returns its summary and metrics rows."""
    import pandas as pd
    flags = ["--dataset", dataset, "--method", method, "--workers", str(workers), "--epochs",
             str(epochs), "--eval-every", str(10 * epochs), *extra, "--no-progress"]
    cmd = [sys.executable, "-m", "digest", "train", *flags, "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed ({proc.returncode}): "
                           f"{(proc.stderr.strip().splitlines() or [''])[-1]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"summary": summary, "metrics": pd.read_csv(out / "metrics.csv"),
            "wall_s": time.perf_counter() - t0,
            "command": "python -m digest train " + " ".join(flags)}


def root_flags(root) -> tuple:
    return ("--data-root", str(root)) if root else ()


def is_complete_summary(directory: Path) -> bool:
    summary = read_json(directory / "summary.json")
    return bool(summary and summary.get("status") == "complete")


def plan(suite, methods: set[str]) -> tuple[list[Run], list[str]]:
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


def run_suite(suite, root: Path, methods: set[str] | None = None, launcher=launch,
              seeds: set[int] | None = None) -> dict:
    """Run the suite's runs not yet complete; with ``seeds``, only those seeds' runs (a long suite
    can then be run in sittings: the tables read whatever runs are complete)."""
    runs, notes = plan(suite, registered_methods() if methods is None else methods)
    for note in notes:
        print(f"note: skipping {note}")
    # the plan names every run of the suite, so that the tables of a sitting restricted to some
    # seeds still read the runs the other sittings completed
    write_json(plan_path(root, suite.name), {"suite": suite.name, "skipped": notes,
                                             "seeds": None if seeds is None else sorted(seeds),
                                             "runs": [str(r.directory(".")) for r in runs]})
    if seeds is not None:
        runs = [r for r in runs if r.seed in seeds]
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


def parse_seeds(text: str | None, suite) -> set[int] | None:
    """``--seeds 0,1`` as a set; every seed must be one the suite runs."""
    if text is None:
        return None
    try:
        seeds = {int(x) for x in text.split(",")}
    except ValueError:
        raise ValueError(f"--seeds takes comma-separated integers (e.g. 0,1), not {text!r}") from None
    known = {r.seed for r in expand(suite)}
    if not seeds <= known:
        raise ValueError(f"suite {suite.name} runs seeds {', '.join(map(str, sorted(known)))}; "
                         f"--seeds {text} names others")
    return seeds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.runner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="quick", help="suite name in experiments/configs or a YAML path")
    p.add_argument("--out", default=None, help="runs root (default: results/<suite>/runs)")
    p.add_argument("--network", default=None, help="with --report: BANDWIDTH,LATENCY, e.g. 10gbit,5us")
    p.add_argument("--report", nargs=2, metavar=("RESULTS", "PLOTS"), default=None,
                   help="after the runs, write the tables into RESULTS and the plots into PLOTS")
    p.add_argument("--seeds", default=None, metavar="LIST",
                   help="only these seeds' runs, comma-separated (e.g. 0,1): a long suite in sittings")
    args = p.parse_args(argv)
    try:
        suite = load_suite(args.suite)
        seeds = parse_seeds(args.seeds, suite)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    root = Path(args.out or f"results/{suite.name}/runs")
    try:
        counts = run_suite(suite, root, seeds=seeds)
    except subprocess.CalledProcessError as e:
        tail = (e.stderr or "").strip().splitlines()[-1:] or ["(no output)"]
        print(f"error: `python -m digest methods` failed: {tail[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished runs are kept; run the same command again to resume",
              file=sys.stderr)
        return 130
    if args.report:
        from . import plots, tables
        net = ["--network", args.network] if args.network else []
        tables.main(["--suite", args.suite, "--runs", str(root), "--out", args.report[0], *net])
        plots.main(["--suite", args.suite, "--runs", str(root), "--out", args.report[1], *net])
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
