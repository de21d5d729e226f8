"""Recompute a suite's committed tables from its committed run files, and check them:

    python -m experiments.recompute --suite repro        # exit 1 on any difference
    python -m experiments.recompute --suite repro --write  # rewrite the tables (and plots)
    ./run_all.sh --check [SUITE]                          # the same check (default: repro)

Every number in results/ must come from a committed file, so that a reader can check it: each suite
run's summary.json, metrics.csv and run.json (its config hash) are committed under
results/<suite>/runs/ (repro's and full's: results/repro/runs/), and this command rebuilds tables.md
and the CSVs from them exactly as run_all.sh does (same runs folder, same network, same command line
in the header) into a temporary folder, then compares them with the committed ones line by line: one
line per difference on stdout, exit status 1 if there is any. Plots are not compared (a PNG's bytes
depend on the matplotlib build and its fonts); ``--write`` regenerates them with the tables. The
suite's RUNLOG.md and the generated blocks of its README (and, with the suite's own folders, the
headline, quick and noise blocks of results/README.md and README.md) are checked and written the same way
(experiments/pages.py).
"""
from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from pathlib import Path

from digest.advise.protocol import TARGETS

from . import pages, tables
from .analysis.costmodel import parse_network
from .render.blocks import MarkerError
from .render.plots import draw
from .suites.layout import folders, loadavg_path
from .suites.load import load
from .suites.suite import load_suite

REPO = Path(__file__).resolve().parents[1]
NETWORK = "10gbit,5us"  # run_all.sh's default NETWORK
TABLES = ("tables.md", "accuracy.csv", "epoch_time.csv", "time_to_accuracy.csv", "bytes.csv",
          "method_state.csv",
          "runs.csv", "straggler.csv", "pareto.csv", "fit.csv", "cluster_epoch_time.csv", "cluster_model.csv",
          "cluster_time_to_accuracy.csv", "timing.csv",
          "timing_tta.csv", "timing_floor_seeds.csv", "timing_rule_change.csv")  # every file experiments.tables may write


def differences(committed: Path, recomputed: Path, names=TABLES) -> list[str]:
    """One line per difference between the committed and the recomputed tables."""
    out = []
    for name in names:
        a, b = committed / name, recomputed / name
        if not a.exists() and not b.exists():
            continue
        if not b.exists():
            out.append(f"{a}: committed, but the runs give no such table")
            continue
        if not a.exists():
            out.append(f"{a}: missing (the runs give it: {sum(1 for _ in open(b))} lines)")
            continue
        old, new = a.read_text().splitlines(), b.read_text().splitlines()
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                continue
            for k in range(max(i2 - i1, j2 - j1)):
                was = old[i1 + k] if i1 + k < i2 else None
                now = new[j1 + k] if j1 + k < j2 else None
                line = i1 + k + 1 if was is not None else i2
                out.append(f"{a}:{line}: committed {_show(was)} != recomputed {_show(now)}")
    return out


def _show(line: str | None, width: int = 160) -> str:
    if line is None:
        return "(no line)"
    return repr(line if len(line) <= width else line[:width] + "...")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.recompute", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="repro", help="suite name in experiments/configs or a YAML path")
    p.add_argument("--runs", default=None, help="runs folder (default: the suite's, as run_all.sh)")
    p.add_argument("--results", default=None, help="committed tables folder (default: the suite's)")
    p.add_argument("--plots", default=None, help="with --write: plots folder (default: the suite's)")
    p.add_argument("--network", default=os.environ.get("NETWORK") or NETWORK,
                   help=f"modeled columns, as run_all.sh's NETWORK (default {NETWORK})")
    p.add_argument("--command", default=None, help="the header's command (default: run_all.sh's)")
    p.add_argument("--write", action="store_true", help="rewrite the tables and plots instead")
    args = p.parse_args(argv)
    try:
        suite = load_suite(args.suite)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    results, plots_dir, command = folders(suite.name)
    results = Path(args.results or results)
    runs = args.runs or str(results / "runs")
    command = args.command or command
    # paths as run_all.sh gives them (relative to the repository), since runs.csv records them
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return _run(args, suite, results, runs, plots_dir, command)
    finally:
        os.chdir(cwd)


def _run(args, suite, results: Path, runs: str, plots_dir: str, command: str) -> int:
    loaded = load(runs, suite)
    if not loaded.records:
        print(f"recompute: no complete run of suite {suite.name} under {runs}", file=sys.stderr)
        return 1
    net = parse_network(args.network)
    if args.write:
        written = tables.write(loaded, results, net, TARGETS, command)
        drawn = draw(loaded, Path(args.plots or plots_dir), net)
        print(f"plots: {len(drawn)} PNGs -> {args.plots or plots_dir}/")
        print(f"recompute: {loaded.done} runs -> {results}/" + ", ".join(written))
        try:  # and the run log and generated blocks (experiments/pages.py)
            rewritten = pages.write(_pages(args, suite, results, runs, plots_dir, command))
        except MarkerError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print("recompute: pages -> " + (", ".join(rewritten) or "unchanged"))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        tables.write(loaded, Path(tmp), net, TARGETS, command)
        diff = differences(results, Path(tmp))
    diff += pages.check(lambda: _pages(args, suite, results, runs, plots_dir, command))
    for line in diff:
        print(line)
    missing = f"; {len(loaded.missing)} of the suite's runs missing" if loaded.missing else ""
    print(f"recompute: {loaded.done} committed runs of suite {suite.name}{missing}: "
          + (f"{len(diff)} difference(s) with {results}" if diff else f"{results} reproduced exactly"),
          file=sys.stderr)
    return 1 if diff else 0


def _pages(args, suite, results: Path, runs: str, plots_dir: str, command: str) -> dict:
    """The suite's RUNLOG.md and page block (experiments/pages.py); with the suite's own folders
    (no --runs, --results), also the headline, quick and noise blocks of results/README.md, README.md."""
    out = pages.suite_outputs(suite, results, Path(args.plots or plots_dir), Path(runs),
                              loadavg_path(suite.name), command)
    return pages.add_shared(out) if args.runs is None and args.results is None else out


if __name__ == "__main__":
    sys.exit(main())
