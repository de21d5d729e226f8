"""The reproduction report: a user's run of a suite against the committed one.

    python -m experiments.studies.reproduce --suite quick --runs runs/quick/runs --out runs/quick

run_all.sh calls it after the tables and plots. Per dataset, method and M that the user's runs
cover (their seeds only: a run with ``--seeds``, or a partial one, is compared for what ran):

- accuracy: the user's test accuracy at best validation (mean over the seeds run) minus the
  committed runs' at the same seeds, in points, and whether it lies within the committed spread:
  the committed mean over all its seeds +- max(2 std, 0.5 points) where 2 or more seeds are
  committed, +- 1.5 points where one is. "identical" when every run's per-epoch train loss and
  validation accuracy equal the committed run's of the same seed to the last digit (the same seed,
  flags, torch build and thread count give bit-identical training);
- bytes per epoch (every epoch's bytes_total, run by run, same seed) must be equal: what crosses
  the wire is fixed by the method, graph, partition and seed. Not compared: DIGEST-A's (when a
  worker pulls depends on timing), nor, where the training itself is not identical, those of the
  methods whose traffic follows the values (SANCUS's skips, AdaQP's adaptive widths, the drift
  schedule). DIGEST-A is not judged at all: its accuracy too follows the workers' relative speeds
  (the staleness they give), i.e. the machine and its load; it is shown and named in the last line;
- per-epoch time as a ratio to exact (epoch_time.csv's speedup_vs_exact; a timing suite's
  timing.csv speedup, with the committed 95% interval), the user's machine against the committed
  one: information only, since a ratio moves with the machine and its load.

The last line: "reproduced" when every point's accuracy is within the spread and its bytes are
equal where compared, else "differs" and where ("nothing to compare" where no committed run
matches what ran). Written to OUT/reproduction.md and printed; exit status 1 when it differs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .analysis import compare
from .render import commits, render
from experiments.suites.layout import folders
from experiments.suites.load import load
from experiments.suites.suite import load_suite

REPO = Path(__file__).resolve().parents[3]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.reproduce", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", required=True, help="suite name in experiments/configs or a YAML path")
    p.add_argument("--runs", required=True, help="your runs folder (run_all.sh: runs/<suite>/runs)")
    p.add_argument("--out", required=True, help="your tables folder: reproduction.md goes there")
    p.add_argument("--committed", default=None,
                   help="the committed tables folder, its runs in runs/ (default: the suite's)")
    args = p.parse_args(argv)
    try:
        suite = load_suite(args.suite)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    committed = Path(args.committed or folders(suite.name)[0])  # relative: to the repository
    if not committed.is_absolute() and not committed.exists():
        committed = REPO / committed
    mine, theirs = load(args.runs, suite).records, load(committed / "runs", suite).records
    text, differs = render(suite.name, compare(mine, theirs, Path(args.out), committed),
                           Path(args.runs), committed, commits(mine, theirs))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "reproduction.md").write_text(text)
    print(text, end="")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
