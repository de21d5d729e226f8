"""Plots (PNG, matplotlib Agg) from complete runs, per dataset:

    python -m experiments.plots --suite quick --runs results/quick/runs --out plots/quick [--network 10gbit,5us]

<dataset>_val_vs_epoch.png, _val_vs_time.png, _val_vs_bytes.png (every method at the largest worker
count, mean over seeds), _speedup_vs_workers.png (per-epoch speedup over exact; modeled pale) and
_bytes_per_epoch.png (stacked by category); _stale_error.png when some method records its halo
rows' staleness as error (``stale_err_l{l}`` columns: DIGEST's ||stale - fresh|| / ||fresh|| per
layer at each store sync); _pareto.png (best test accuracy within a budget of bytes / of time,
the front marked: experiments/analysis/pareto.py, drawn by experiments/render/pareto.py).

Every figure that draws methods draws them in small multiples of at most six a panel, each method
in the colour and marker it has in every plot (experiments/render/figures.py); the figures:
experiments/render/plots.py.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .analysis.costmodel import parse_network
from .render.plots import draw
from .suites.load import load
from .suites.suite import load_suite


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.plots", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True)
    p.add_argument("--suite", default=None)
    p.add_argument("--out", required=True)
    p.add_argument("--network", default=None, help="add modeled speedup lines, e.g. 10gbit,5us")
    args = p.parse_args(argv)
    net = parse_network(args.network) if args.network else None
    loaded = load(args.runs, load_suite(args.suite) if args.suite else None)
    if not loaded.records:
        print(f"plots: no complete runs under {args.runs}", file=sys.stderr)
        return 1
    out = Path(args.out)
    written = draw(loaded, out, net)
    print(f"plots: {len(written)} PNGs -> {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
