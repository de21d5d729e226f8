"""Paper-style tables from complete runs (docs/methods.md section 7), as CSV and markdown:

    python -m experiments.tables --suite quick --runs results/quick/runs --out results/quick \
        [--network 10gbit,5us] [--target 0.98,0.99,0.995]

accuracy.csv, epoch_time.csv, time_to_accuracy.csv, bytes.csv, method_state.csv (each method's
own metrics columns and peak memory: experiments/analysis/method_state.py), runs.csv, pareto.csv
(best test accuracy within budgets of bytes and of time, the front marked:
experiments/analysis/pareto.py) and tables.md (experiments/render/report.py, whose
header names the machine, versions, commit and commands, read from the runs' summary.json); when
some run has stragglers (``--slow-workers``), also straggler.csv (pace of the fast and the slow
workers, total time, accuracy, staleness observed); when the suite ran the timing protocol (rounds
or an A/A label: experiments/analysis/timing.py), also timing.csv and timing_tta.csv (paired speedups with
their interval and the A/A noise floor), which sections 2 and 3 of tables.md then print, and,
where the A/A label ran at several seeds, timing_floor_seeds.csv (its floor at each seed apart).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from digest.advise.protocol import TARGETS

from .analysis.tables import build
from .analysis.costmodel import Network, parse_network
from .render.report import markdown
from .suites.load import Loaded, load
from .suites.suite import load_suite


def parse_targets(text: str) -> tuple:
    """'0.98,0.99,0.995' -> (0.98, 0.99, 0.995); each in (0, 1]."""
    out = tuple(float(x) for x in str(text).split(",") if x.strip())
    if not out or not all(0 < f <= 1 for f in out):
        raise ValueError(f"--target wants fractions in (0, 1], comma-separated, got {text!r}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.tables", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True, help="runs root written by experiments.runner")
    p.add_argument("--suite", default=None, help="read exactly this suite's runs (else every complete run)")
    p.add_argument("--out", required=True, help="folder for the CSVs and tables.md")
    p.add_argument("--network", default=None, help="add modeled columns, e.g. 10gbit,5us")
    p.add_argument("--target", type=parse_targets, default=TARGETS,
                   help="fraction(s) of exact's best val, comma-separated (default: "
                   + ",".join(f"{t:g}" for t in TARGETS) + ")")
    p.add_argument("--emulated-time", default=None, metavar="COLUMN",
                   help="pareto.csv: also a time axis from this metrics column (cumulative "
                   "emulated seconds), labelled emulated")
    args = p.parse_args(argv)
    net = parse_network(args.network) if args.network else None
    loaded = load(args.runs, load_suite(args.suite) if args.suite else None)
    if not loaded.records:
        print(f"tables: no complete runs under {args.runs}", file=sys.stderr)
        return 1
    command = os.environ.get("RUN_ALL_COMMAND") or "python -m experiments.tables " + " ".join(
        sys.argv[1:] if argv is None else argv)
    written = write(loaded, Path(args.out), net, args.target, command, args.emulated_time)
    print(f"tables: {loaded.done} runs -> {args.out}/" + ", ".join(written))
    return 0


def write(loaded: Loaded, out: Path, net: Network | None, targets, command: str,
          emulated_time: str | None = None) -> list[str]:
    """Every table of ``loaded`` into ``out``: one CSV per table and tables.md; their names."""
    tables = build(loaded, net, targets, emulated_time)
    out.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        df.to_csv(out / f"{name}.csv", index=False, float_format="%.6g")
    (out / "tables.md").write_text(markdown(loaded, tables, net, targets, command))
    return ["tables.md", *(f"{name}.csv" for name in tables)]


if __name__ == "__main__":
    sys.exit(main())
