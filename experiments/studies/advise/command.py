"""What ``python -m digest advise`` ships, recomputed from the committed runs, and how well it
predicts them (docs/methods.md section 13):

    python -m experiments.studies.advise table [--write | --check]   # digest/advise/convergence.json
    python -m experiments.studies.advise fit [--write | --check]     # digest/advise/calibration.json
    python -m experiments.studies.advise check [--write | --check]   # results/advise/README.md, points.csv

``table``: the epochs-to-target table, from the committed convergence runs
(experiments/studies/advise/table.py). ``fit``: the constants of the time model, fitted on some of
the committed emulated-cluster points and never on the others (experiments/studies/advise/fit.py).
``check``: the model against the points it was not fitted on (experiments/studies/advise/
check.py; the page: experiments/studies/advise/render.py).

--write writes the files; --check recomputes them and fails (exit 1) when a committed one differs;
neither: the first file is printed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from digest.advise.cost import CALIBRATION
from digest.advise.epochs import TABLE

from . import check
from . import fit
from . import table
from .render import page, points_csv


def files(what: str) -> dict[Path, str]:
    """{path: the text the committed runs give} of ``what``: table, fit or check."""
    if what == "table":
        return {Path(TABLE): table.text(table.build())}
    if what == "fit":
        return {Path(CALIBRATION): json.dumps(fit.build(), indent=1) + "\n"}
    result = check.evaluate()
    return {check.OUT / "README.md": page(result), check.OUT / "points.csv": points_csv(result)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.advise", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("table", "fit", "check"),
                   help="the table, the fit or the check (see above)")
    p.add_argument("--write", action="store_true", help="write the files")
    p.add_argument("--check", action="store_true", help="recompute and compare")
    args = p.parse_args(argv)
    now = files(args.what)
    if args.write:
        for path, text in now.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if args.check:
        stale = [str(path) for path, text in now.items()
                 if not path.is_file() or path.read_text() != text]
        if stale:
            print(f"{', '.join(stale)} differ from what the committed runs give: run "
                  f"`python -m experiments.studies.advise {args.what} --write`", file=sys.stderr)
            return 1
        print(f"{', '.join(map(str, now))}: up to date")
    if not (args.write or args.check):
        sys.stdout.write(next(iter(now.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
